// context: a Fastify `app` with the plugin on /webhooks/svc, `ops` (the console of
// docs/console.md) and `toNodeHandler` imported, in an ES module; it listens on $PORT after.
// runs as: server
import Fastify from 'fastify'
import { MemoryHistory } from 'svc-webhooks/history'
import webhooks from 'svc-webhooks/fastify'
import { createConsole, toNodeHandler } from 'svc-webhooks/console'

const history = new MemoryHistory()
const ops = createConsole({ authorize: () => false, history })
const app = Fastify()
app.register(webhooks, { path: '/webhooks/svc', secret: process.env.SVC_WEBHOOK_SECRET, history, on: { 'message.received': async (event) => console.log('message', event.message.id) } })
/* fragment */
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
