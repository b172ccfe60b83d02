// context: an ES module holding an inbox `worker` (createInboxWorker over a MemoryInbox, with a
// MemoryHistory that keeps bodies) whose handler failed once on a delivery and is fixed now; it
// stops the worker and exits after the fragment.
// runs as: script
import * as core from 'svc-webhooks'
import { MemoryHistory } from 'svc-webhooks/history'
import { signWebhook, sampleEvent } from 'svc-webhooks/testing'

const history = new MemoryHistory({ keepBodies: true })
const inbox = new core.MemoryInbox()
let fixed = false
const on = { 'message.received': async () => { if (!fixed) throw new Error('the bug') } }
const worker = core.createInboxWorker({ inbox, history, on, log: false })
const receiver = core.createWebhookReceiver({ secret: process.env.SVC_WEBHOOK_SECRET, inbox, history, on, log: false })
const signed = await signWebhook({ secret: process.env.SVC_WEBHOOK_SECRET, event: sampleEvent('message.received') })
const deliveryId = signed.id
await receiver.handle({ body: signed.body, headers: signed.headers })
worker.start()
for (let i = 0; i < 100 && (await history.get(deliveryId))?.outcome !== 'failed'; i++) await new Promise((r) => setTimeout(r, 20))
fixed = true
/* fragment */
await worker.stop()
process.exit(0)
