// context: docs/hono.md's server.ts up to its route (`app`, `webhooks`), with `on` and a
// `tenantSecret` lookup defined; it is served on $PORT after.
// runs as: server
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/hono'

const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const tenantSecret = (tenant: string): string | undefined => (tenant === 'svc' ? process.env.SVC_WEBHOOK_SECRET : undefined)

const app = new Hono()
/* fragment */
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' })
