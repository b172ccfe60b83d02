/**
 * `svc-webhooks/cloudflare`: a module Worker's `{ fetch, queue }` over the Fetch adapter, with the
 * secret read from an `env` binding, the Durable Object store (atomic dedupe across every instance
 * of the Worker; src/stores/durable-object.ts) and Cloudflare Queues as the durable inbox
 * (src/inbox/queue.ts): `fetch` sends each verified delivery to the Queue, `queue` runs the handlers.
 */
import { errorResponse, type InboxWorkerResult, type VerifyOptions } from '../src/index.js'
import { queueWorker, type QueueBatchLike, type QueueProducerLike } from '../src/inbox/queue.js'
import { createLogWindow } from '../src/log-window.js'
import { createFetchHandler, toResponse, type FetchHandlerOptions } from './fetch.js'

export {
  DurableObjectStore,
  WebhookIdempotencyObject,
  type DurableObjectNamespaceLike,
  type DurableObjectStoreOptions,
  type DurableObjectStateLike,
} from '../src/stores/durable-object.js'
export { createQueueConsumer, QueueInbox, QUEUE_MAX_BODY_BYTES } from '../src/inbox/queue.js'
export type { QueueBatchLike, QueueConsumerOptions, QueuedDelivery, QueueInboxOptions, QueueMessageLike, QueueProducerLike } from '../src/inbox/queue.js'
export type { WebhookInboxProducer } from '../src/contracts/inbox.js'

/** Options of {@link withWebhooks}: the receiver's options, with the secret taken from `env`. */
export interface WorkerWebhookOptions extends Omit<FetchHandlerOptions, 'secret'> {
  /**
   * The `env` binding(s) holding the secret. A binding may hold several secrets separated by
   * commas, and several bindings may be named, for a rotation. Ignored when `secret` is given.
   * @default 'SVC_WEBHOOK_SECRET'
   */
  secretBinding?: string | readonly string[]
  /** The secret itself, instead of a binding. */
  secret?: VerifyOptions<Request>['secret']
  /**
   * A Queue producer binding (`env.WEBHOOK_QUEUE`) as the durable inbox: `fetch` answers 202 once
   * the delivery is in the Queue, `queue()` runs the handlers. Needs `store` (a DurableObjectStore);
   * `maxBodyBytes` then defaults to, and may not exceed, {@link QUEUE_MAX_BODY_BYTES}.
   */
  queue?: QueueProducerLike
  /** With `queue`: called once per consumed message with how it ended (processed, retrying...). */
  onQueueResult?: (result: InboxWorkerResult) => unknown
  /**
   * With `queue`: the longest a handler may run in `queue()`; past it `delivery.signal` is aborted
   * and the message retried with backoff.
   * @default 300000 (5 min)
   */
  handlerTimeoutMs?: number
}

/** What `export default` takes: a module Worker's fetch handler and Queue consumer. */
export interface WebhookWorker<Env> {
  fetch(request: Request, env: Env, ctx?: unknown): Promise<Response>
  queue(batch: QueueBatchLike, env: Env, ctx?: unknown): Promise<void>
}

type Parts = { fetch: (request: Request) => Promise<Response>; queue: (batch: QueueBatchLike) => Promise<void> }

function secretsFrom(env: Record<string, unknown>, names: readonly string[]): string[] {
  // Commas separate secrets; surrounding whitespace is left for the core to refuse loudly.
  return names.flatMap((name) => (typeof env[name] === 'string' ? (env[name] as string).split(/ *, */) : [])).filter(Boolean)
}

/**
 * Wraps the receiver as a module Worker. Pass a function of `env` to reach bindings (D1, queues,
 * the Durable Object namespace): it runs once per `env` object and is cached. A missing or empty
 * secret binding answers 500 (retried) and logs the binding's name, never its value; invalid
 * options make `queue()` throw too, so the Queue retries the batch.
 *
 * @example
 * export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'
 * export default withWebhooks((env: Env) => ({
 *   store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
 *   queue: env.WEBHOOK_QUEUE, // optional: answer 202 now, run the handlers in queue()
 *   on: { 'message.received': async (event) => { await env.DB.prepare('insert ...').run() } },
 * }))
 */
export function withWebhooks<Env extends object = object>(
  options: WorkerWebhookOptions | ((env: Env) => WorkerWebhookOptions),
): WebhookWorker<Env> {
  const cache = new WeakMap<object, Parts>()
  const create = (env: Env): Parts => {
    let source = 'options'
    let queue: Parts['queue'] | undefined
    try {
      const { secretBinding = 'SVC_WEBHOOK_SECRET', secret, queue: producer, onQueueResult, ...rest } = typeof options === 'function' ? options(env) : options
      // Built before the secret is looked up: the consumer needs none.
      const queued = producer === undefined ? undefined : queueWorker(producer, { ...rest, onQueueResult })
      queue = queued?.consume ?? (() => Promise.reject(new TypeError('svc-webhooks/cloudflare: queue() was called, but withWebhooks was given no `queue` binding.')))
      const names = [secretBinding].flat()
      if (secret === undefined) source = `secret binding "${names.join('", "')}"`
      const fromEnv = secret === undefined ? secretsFrom(env as Record<string, unknown>, names) : []
      if (secret === undefined && fromEnv.length === 0) {
        throw new TypeError(`it is missing or empty. Set it with \`npx wrangler secret put ${names[0]}\` (or in .dev.vars for wrangler dev).`)
      }
      return { fetch: createFetchHandler({ ...rest, ...queued?.receiver, secret: secret ?? fromEnv }), queue }
    } catch (error) {
      // Collapsed per window: anyone can send requests, and each would write this line.
      const lines = createLogWindow((line) => console.error(line))
      const log = () => lines.write('svc-webhooks/cloudflare: cannot receive webhooks', `svc-webhooks/cloudflare: cannot receive webhooks (${source}): ${error instanceof Error ? error.message : error}`)
      // Never a silent pass: every delivery is answered 500 and every batch retried until it is fixed.
      return { fetch: async () => (log(), toResponse(errorResponse(error))), queue: queue ?? (async () => (log(), Promise.reject(error))) }
    }
  }
  const parts = (env: Env): Parts => {
    const key = typeof env === 'object' && env !== null ? env : cache
    return cache.get(key) ?? cache.set(key, create(env)).get(key)!
  }
  return { fetch: (request, env) => parts(env).fetch(request), queue: (batch, env) => parts(env).queue(batch) }
}
