// context: the README's Quick start (server.mjs) up to its webhook route; it listens on $PORT after.
// runs as: server
import express from 'express'
import { webhooks } from 'svc-webhooks/express'

async function saveMessage(deliveryId, message) {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
const tenantSecret = (tenant) => (tenant === 'svc' ? process.env.SVC_WEBHOOK_SECRET : undefined)

const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
