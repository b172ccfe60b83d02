// Deno receiver with the Fetch entry:
// `SVC_WEBHOOK_SECRET=svc_whsec_... deno run --allow-net=127.0.0.1 --allow-env=SVC_WEBHOOK_SECRET,PORT --allow-read=. examples/deno/server.ts`
import { createFetchHandler } from 'svc-webhooks/fetch'

const secret = Deno.env.get('SVC_WEBHOOK_SECRET')
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...).')
  Deno.exit(1)
}

const receive = createFetchHandler({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}: ${event.message.text}`)
    },
  },
})

const port = Number(Deno.env.get('PORT') ?? 3000)
try {
  Deno.serve(
    {
      hostname: '127.0.0.1',
      port,
      onListen: ({ port }) => console.log(`Deno receiving on http://127.0.0.1:${port}/webhooks/svc`),
    },
    (request) => (new URL(request.url).pathname === '/webhooks/svc' ? receive(request) : new Response('not found', { status: 404 })),
  )
} catch (error) {
  console.error(`Deno cannot listen on 127.0.0.1:${port}: ${(error as Error).message}`)
  Deno.exit(1)
}
