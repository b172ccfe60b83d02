// Fastify receiver: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/fastify/server.mjs`
import Fastify from 'fastify'
import webhooks from 'svc-webhooks/fastify'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/fastify/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const app = Fastify()
// The plugin parses its own route's body as raw bytes; the app's other routes keep JSON parsing.
await app.register(webhooks, {
  path: '/webhooks/svc',
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
})

try {
  await app.listen({ port, host: '127.0.0.1' })
} catch (error) {
  console.error(`Fastify cannot listen on 127.0.0.1:${port}: ${error.message}`)
  process.exit(1)
}
console.log(`Fastify receiving on http://127.0.0.1:${app.server.address().port}/webhooks/svc`)
