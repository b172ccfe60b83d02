// context: docs/koa.md's server.ts up to its middleware (`app`, `webhooks`), with `on` and a
// `tenantSecret` lookup defined; it listens on $PORT after.
// runs as: server
import Koa from 'koa'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/koa'

const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const tenantSecret = (tenant: string): string | undefined => (tenant === 'svc' ? process.env.SVC_WEBHOOK_SECRET : undefined)

const app = new Koa()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
