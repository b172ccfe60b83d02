/**
 * A Worker whose durable inbox is a Cloudflare Queue (bundled by test/support/workerd.ts, run in
 * workerd with the Queue bound as producer and consumer by cloudflare-queue.test.ts): `fetch`
 * appends, `queue` runs the handlers. It records every handler run, every consumer result and
 * what reached the dead-letter queue, and lets the test put messages on the Queue directly (a
 * copy Queues hand out twice, a type whose handler was removed after it was accepted).
 */
import type { InboxWorkerResult, TelemetryScope, WebhookHandlers, WebhookTelemetry } from 'svc-webhooks'
import {
  DurableObjectStore,
  QueueInbox,
  withWebhooks,
  type DurableObjectNamespaceLike,
  type QueueBatchLike,
  type QueueProducerLike,
} from 'svc-webhooks/cloudflare'

export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'

interface Env {
  SVC_WEBHOOK_SECRET: string
  WEBHOOK_IDEMPOTENCY: DurableObjectNamespaceLike
  WEBHOOK_QUEUE: QueueProducerLike
}

const DEAD_LETTER_QUEUE = 'webhooks-dlq'

const runs: { id: string; text: string; rawBody: string; at: number }[] = []
const results: (Omit<InboxWorkerResult, 'error'> & { error?: string; at: number })[] = []
const dead: { id: string; attempts: number }[] = []
const failures = new Map<string, number>()
/** Why each hung handler's signal was aborted, by delivery id. */
const aborted: { id: string; reason: string }[] = []
let refuseSends = 0
/** Every telemetry scope that ended: the receive scopes' trace contexts, and what each process scope was started with. */
const scopes: { operation: 'receive' | 'process'; id?: string; traceparent?: string; outcome: string }[] = []
const hex = (bytes: number) => [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, '0')).join('')
// Records what the entry reports; the OpenTelemetry mapping itself is tested with the real SDK in Node.
const telemetry: WebhookTelemetry = {
  receive(): TelemetryScope {
    const traceparent = `00-${hex(16)}-${hex(8)}-01`
    return { verified: () => undefined, run: (fn) => fn(), traceparent: () => traceparent, end: (r) => void scopes.push({ operation: 'receive', id: r.id, traceparent, outcome: r.outcome }) }
  },
  process(start): TelemetryScope {
    return {
      verified: () => undefined,
      run: (fn) => fn(),
      traceparent: () => start.traceparent,
      end: (r) => void scopes.push({ operation: 'process', id: start.id, ...(start.traceparent && { traceparent: start.traceparent }), outcome: r.outcome }),
    }
  },
}

const on: WebhookHandlers = {
  'message.received': async (event, delivery) => {
    runs.push({ id: delivery.id, text: event.message.text, rawBody: new TextDecoder().decode(delivery.rawBody), at: Date.now() })
    const failed = failures.get(delivery.id) ?? 0
    // Hangs on its first run, never settling: the consumer's deadline must free the batch.
    if (event.message.text === 'hang-once' && failed === 0) {
      failures.set(delivery.id, 1)
      delivery.signal?.addEventListener('abort', () => aborted.push({ id: delivery.id, reason: String(delivery.signal?.reason) }))
      return new Promise<void>(() => {})
    }
    if ((event.message.text === 'fail-once' && failed === 0) || event.message.text === 'fail-always') {
      failures.set(delivery.id, failed + 1)
      throw new Error(`the handler failed (${delivery.id})`)
    }
  },
}

const options = (env: Env) => ({
  store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
  on,
  handlerTimeoutMs: 500,
  telemetry,
  onQueueResult: (result: InboxWorkerResult) => {
    results.push({ ...result, error: result.error === undefined ? undefined : String(result.error), at: Date.now() })
  },
})

const worker = withWebhooks((env: Env) => ({ ...options(env), queue: env.WEBHOOK_QUEUE }))

// The same Worker over a producer that refuses its next `refuseSends` messages (the Queue down),
// trying a send again for 300 ms inside the request.
const flaky = withWebhooks((env: Env) => ({
  ...options(env),
  inboxWaitMs: 300,
  queue: { send: (body, opts) => (refuseSends-- > 0 ? Promise.reject(new Error('the Queue is down')) : env.WEBHOOK_QUEUE.send(body, opts)) },
}))

const noStore = withWebhooks((env: Env) => ({ on, queue: env.WEBHOOK_QUEUE }))

// A store that lets every append through: the Queue then holds copies, as when it delivers one twice.
const admitsAll = { claim: async () => 'claimed' as const, complete: async () => true, release: async () => true }

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url)
    if (pathname === '/webhooks/svc') return worker.fetch(request, env)
    if (pathname === '/flaky') return flaky.fetch(request, env)
    if (pathname === '/no-store') return noStore.fetch(request, env)
    if (pathname === '/refuse-sends') {
      refuseSends = Number(await request.text())
      return Response.json({ ok: true })
    }
    if (pathname === '/state') return Response.json({ runs, results, dead, aborted, scopes })
    if (pathname === '/copies') {
      const { id, body, copies } = (await request.json()) as { id: string; body: string; copies: number }
      const inbox = new QueueInbox(env.WEBHOOK_QUEUE, { store: admitsAll })
      const delivery = { keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(Date.now() / 1000), signatureVersion: 'v2' as const }
      for (let i = 0; i < copies; i++) {
        await inbox.append({ ...delivery, secretIndex: 0, rawBody: new TextEncoder().encode(body), receivedAt: Date.now() })
      }
      return Response.json({ ok: true })
    }
    return new Response('not found', { status: 404 })
  },

  async queue(batch: QueueBatchLike, env: Env): Promise<void> {
    if (batch.queue !== DEAD_LETTER_QUEUE) return worker.queue(batch, env)
    for (const message of batch.messages) {
      dead.push({ id: (message.body as { id: string }).id, attempts: message.attempts })
      message.ack()
    }
  },
}
