// context: docs/express.md's server.ts up to its webhook route (`app`, `webhooks`, `on`); the
// app is built, not served: for a route whose secret lives where this machine has none.
// runs as: script
import express from 'express'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const app = express()
/* fragment */
void webhooks
process.exit(0)
