/**
 * The queue variant (wrangler.queue.toml): POST /webhooks/svc answers 202 as soon as the verified
 * delivery is in the WEBHOOK_QUEUE Queue, and this same Worker's `queue()` runs the handlers
 * afterwards: once per delivery id, retried with backoff on failure, and moved to the Queue's
 * dead-letter queue after `max_retries`. The sender never waits for, or is failed by, a handler.
 */
import { DurableObjectStore, withWebhooks, type DurableObjectNamespaceLike, type QueueProducerLike } from 'svc-webhooks/cloudflare'

// The Durable Object class the store talks to; bound in wrangler.queue.toml.
export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'

interface Env {
  SVC_WEBHOOK_SECRET: string // `npx wrangler secret put SVC_WEBHOOK_SECRET`, or .dev.vars for `wrangler dev`
  WEBHOOK_IDEMPOTENCY: DurableObjectNamespaceLike
  WEBHOOK_QUEUE: QueueProducerLike // [[queues.producers]]; with @cloudflare/workers-types, `Queue`
}

// Runs once per `env`, not per request or batch.
const webhook = withWebhooks((env: Env) => ({
  store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
  queue: env.WEBHOOK_QUEUE,
  on: {
    'message.received': async (event, delivery) => {
      // Your work goes here; a throw retries it later (1 s, 2 s, 4 s... up to 1 h).
      console.log(`message ${event.message.id} in conversation ${event.conversation_id} (delivery ${delivery.id})`)
    },
  },
  onQueueResult: (result) => {
    if (result.outcome === 'retrying') console.warn(`delivery ${result.id} failed (attempt ${result.attempts}), retried in ${result.retryInMs} ms: ${result.error}`)
  },
}))

export default {
  fetch(request: Request, env: Env, ctx: unknown): Promise<Response> | Response {
    if (new URL(request.url).pathname === '/webhooks/svc') return webhook.fetch(request, env, ctx)
    return new Response('Not found', { status: 404 })
  },
  // The consumer of [[queues.consumers]]: the handlers run here.
  queue: webhook.queue,
}
