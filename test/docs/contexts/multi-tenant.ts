// context: docs/express.md's server.ts up to its route (`app`, `webhooks`, `on`), docs/multi-tenant.md's
// tenant-secrets.ts beside it, and `db`, your database client (here one tenant, "svc"); it
// listens on $PORT after.
// runs as: server
import express from 'express'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

const db = {
  async query(_sql: string, [tenant]: string[]) {
    return tenant === 'svc' ? { signing_secret: process.env.SVC_WEBHOOK_SECRET!, pending: false } : undefined
  },
}
const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
