// context: docs/express.md's server.ts up to its webhook route, with `secret`, `on` and a
// `tenantSecret` lookup defined; it listens on $PORT after.
// runs as: server
import express from 'express'
import type { MessageReceivedEvent, WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
const secret = process.env.SVC_WEBHOOK_SECRET!
const on: WebhookHandlers = { 'message.received': async (event, delivery) => saveMessage(delivery.id, event.message) }
const tenantSecret = (tenant: string): string | undefined => (tenant === 'svc' ? secret : undefined)

const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
