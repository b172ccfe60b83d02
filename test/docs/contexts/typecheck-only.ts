// context: docs/express.md's server.ts up to its route (`app`, `webhooks`, `secret`, `on`), in an
// ES module, for a fragment that names machines that are not this one (a production Redis
// Cluster's nodes, Sentinels): it is type-checked with the others, never run, so that no test
// connects anywhere but 127.0.0.1.
// runs as: typecheck
import express from 'express'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

const secret = process.env.SVC_WEBHOOK_SECRET!
const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
