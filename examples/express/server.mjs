// Express receiver: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/express/server.mjs`
import express from 'express'
import { webhooks } from 'svc-webhooks/express'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/express/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const app = express()
// The webhook route comes before express.json(): the signature covers the raw bytes.
app.post('/webhooks/svc', webhooks({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
}))
app.use(express.json())

// Express 5 hands a listen error (a busy port) to this callback instead of throwing it.
const server = app.listen(port, '127.0.0.1', (error) => {
  if (error) {
    console.error(`Express cannot listen on 127.0.0.1:${port}: ${error.message}`)
    process.exit(1)
  }
  console.log(`Express receiving on http://127.0.0.1:${server.address().port}/webhooks/svc`)
})
