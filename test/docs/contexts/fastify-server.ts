// context: docs/fastify.md's server.ts up to its plugin (`app`, `webhooks`), with `on` and a
// `tenantSecret` lookup defined; it listens on $PORT after.
// runs as: server
import Fastify from 'fastify'
import type { WebhookHandlers } from 'svc-webhooks'
import webhooks from 'svc-webhooks/fastify'

const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const tenantSecret = (tenant: string): string | undefined => (tenant === 'svc' ? process.env.SVC_WEBHOOK_SECRET : undefined)

const app = Fastify()
/* fragment */
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
