// Hono receiver on Node: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/hono/server.mjs`
// The same app runs on Bun, Deno and Cloudflare Workers: only `serve` below is Node-specific.
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { webhooks } from 'svc-webhooks/hono'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/hono/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const app = new Hono()
app.post('/webhooks/svc', webhooks({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
}))

const server = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, (info) => {
  console.log(`Hono receiving on http://127.0.0.1:${info.port}/webhooks/svc`)
})
server.on('error', (error) => {
  console.error(`Hono cannot listen on 127.0.0.1:${port}: ${error.message}`)
  process.exit(1)
})
