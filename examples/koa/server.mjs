// Koa receiver: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/koa/server.mjs`
import Koa from 'koa'
import { webhooks } from 'svc-webhooks/koa'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/koa/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const hook = webhooks({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
})

const app = new Koa()
// Koa has no router: the webhook's path goes to the middleware, everything else to the app.
app.use((ctx, next) => (ctx.path === '/webhooks/svc' ? hook(ctx, next) : next()))

const server = app.listen(port, '127.0.0.1', () => {
  console.log(`Koa receiving on http://127.0.0.1:${server.address().port}/webhooks/svc`)
})
server.on('error', (error) => {
  console.error(`Koa cannot listen on 127.0.0.1:${port}: ${error.message}`)
  process.exit(1)
})
