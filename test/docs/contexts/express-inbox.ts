// context: an Express app with `secret`, `on` and an `inbox` (docs/inbox.md), `webhooks` and
// `createInboxWorker` imported. After the fragment: the webhook route into the inbox (a route
// the fragment added for the same path comes first), then it listens on $PORT.
// runs as: server
import express from 'express'
import { createInboxWorker, MemoryInbox, type WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

const secret = process.env.SVC_WEBHOOK_SECRET!
const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const inbox = new MemoryInbox()
void createInboxWorker

const app = express()
/* fragment */
app.post('/webhooks/svc', webhooks({ secret, inbox }))
app.listen(Number(process.env.PORT), '127.0.0.1')
