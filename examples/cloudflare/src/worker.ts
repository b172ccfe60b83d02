/**
 * A Cloudflare Worker receiving the service's webhooks at POST /webhooks/svc: the secret comes
 * from the SVC_WEBHOOK_SECRET binding, deduplication from a Durable Object (atomic across every
 * instance of the Worker), and handlers reach `env` for D1, queues or anything else bound.
 */
import { DurableObjectStore, withWebhooks, type DurableObjectNamespaceLike } from 'svc-webhooks/cloudflare'

// The Durable Object class the store talks to; bound in wrangler.toml.
export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'

interface Env {
  SVC_WEBHOOK_SECRET: string // `npx wrangler secret put SVC_WEBHOOK_SECRET`, or .dev.vars for `wrangler dev`
  WEBHOOK_IDEMPOTENCY: DurableObjectNamespaceLike
}

// Runs once per `env`, not per request.
const webhook = withWebhooks((env: Env) => ({
  store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
  on: {
    'message.received': async (event, delivery) => {
      // Your work goes here, e.g. with a D1 binding:
      // await env.DB.prepare('insert into messages (id, text) values (?, ?)').bind(event.message.id, event.message.text).run()
      console.log(`message ${event.message.id} in conversation ${event.conversation_id} (delivery ${delivery.id})`)
    },
  },
}))

export default {
  fetch(request: Request, env: Env, ctx: unknown): Promise<Response> | Response {
    if (new URL(request.url).pathname === '/webhooks/svc') return webhook.fetch(request, env, ctx)
    return new Response('Not found', { status: 404 })
  },
}
