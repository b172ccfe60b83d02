// context: your `saveMessage`, and a request read the way your server reads it: `req`
// (method and headers) and `rawBytes` (the body, untouched); here one signed delivery. After
// the fragment, `status` must be 200.
// runs as: script
import type { MessageReceivedEvent } from 'svc-webhooks'
import * as testing from 'svc-webhooks/testing'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
const signed = await testing.signWebhook({ secret: process.env.SVC_WEBHOOK_SECRET!, event: testing.sampleEvent('message.received') })
const req = { method: 'POST', headers: signed.headers }
const rawBytes = signed.rawBody
/* fragment */
void headers, body
process.exit(status === 200 ? 0 : 1)
