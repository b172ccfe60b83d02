// context: a script run with SVC_API_URL, SVC_API_TOKEN and SVC_BUSINESS_ID set (here: the
// package's service emulator); it exits once the fragment has run.
// runs as: script
import * as testing from 'svc-webhooks/testing'

const emulator = await testing.createServiceEmulator()
process.env.SVC_API_URL = emulator.baseUrl
process.env.SVC_API_TOKEN = emulator.token
process.env.SVC_BUSINESS_ID = emulator.businessId
/* fragment */
await emulator.close()
process.exit(0)
