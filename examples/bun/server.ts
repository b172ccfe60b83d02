// Bun receiver with the Fetch entry: `SVC_WEBHOOK_SECRET=svc_whsec_... bun examples/bun/server.ts`
import { createFetchHandler } from 'svc-webhooks/fetch'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test bun examples/bun/server.ts')
  process.exit(1)
}

const receive = createFetchHandler({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}: ${event.message.text}`)
    },
  },
})

const port = Number(process.env.PORT ?? 3000)
let server: ReturnType<typeof Bun.serve>
try {
  server = Bun.serve({
    hostname: '127.0.0.1',
    port,
    fetch: (request) => (new URL(request.url).pathname === '/webhooks/svc' ? receive(request) : new Response('not found', { status: 404 })),
  })
} catch (error) {
  console.error(`Bun cannot listen on 127.0.0.1:${port}: ${(error as Error).message}`)
  process.exit(1)
}
console.log(`Bun receiving on http://127.0.0.1:${server.port}/webhooks/svc`)
