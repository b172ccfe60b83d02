// context: the README's Quick start in TypeScript (server.ts) up to its webhook route (`app`,
// `webhooks`, `saveMessage`), with a `tenantSecret` lookup defined; it listens on $PORT after.
// runs as: server
import express from 'express'
import type { MessageReceivedEvent } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
const tenantSecret = (tenant: string): string | undefined => (tenant === 'svc' ? process.env.SVC_WEBHOOK_SECRET : undefined)

const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
