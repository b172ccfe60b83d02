// node:http receiver: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/node/server.mjs`
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/node/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const handle = createNodeHandler({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
})

const server = createServer((req, res) => {
  if (req.url === '/webhooks/svc') return handle(req, res)
  res.writeHead(404).end()
})
server.on('error', (error) => {
  console.error(`node:http cannot listen on 127.0.0.1:${port}: ${error.message}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => console.log(`node:http receiving on http://127.0.0.1:${server.address().port}/webhooks/svc`))
