/**
 * `svc-webhooks/cloudflare`: a module Worker's `{ fetch(request, env, ctx) }` over the Fetch
 * adapter, with the secret read from an `env` binding, and the Durable Object store (atomic
 * dedupe across every instance of the Worker; src/stores/durable-object.ts).
 */
import { errorResponse, type VerifyOptions } from '../src/index.js'
import { createFetchHandler, toResponse, type FetchHandlerOptions } from './fetch.js'

export {
  DurableObjectStore,
  WebhookIdempotencyObject,
  type DurableObjectNamespaceLike,
  type DurableObjectStoreOptions,
  type DurableObjectStateLike,
} from '../src/stores/durable-object.js'

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
}

/** What `export default` takes: a module Worker's fetch handler. */
export interface WebhookWorker<Env> {
  fetch(request: Request, env: Env, ctx?: unknown): Promise<Response>
}

type Handler = (request: Request) => Promise<Response>

function secretsFrom(env: Record<string, unknown>, names: readonly string[]): string[] {
  // Commas separate secrets; surrounding whitespace is left for the core to refuse loudly.
  return names.flatMap((name) => (typeof env[name] === 'string' ? (env[name] as string).split(/ *, */) : [])).filter(Boolean)
}

/**
 * Wraps the receiver as a module Worker. Pass a function of `env` to reach bindings (D1, queues,
 * the Durable Object namespace) from handlers: it runs once per `env` object and is cached. A
 * missing or empty secret binding answers 500 (retried) and logs the binding's name, never its value.
 *
 * @example
 * export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'
 * export default withWebhooks((env: Env) => ({
 *   store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
 *   on: { 'message.received': async (event) => env.QUEUE.send(event.message) },
 * }))
 */
export function withWebhooks<Env extends object = object>(
  options: WorkerWebhookOptions | ((env: Env) => WorkerWebhookOptions),
): WebhookWorker<Env> {
  const handlers = new WeakMap<object, Handler>()
  const create = (env: Env): Handler => {
    let source = 'options'
    try {
      const { secretBinding = 'SVC_WEBHOOK_SECRET', secret, ...rest } = typeof options === 'function' ? options(env) : options
      const names = [secretBinding].flat()
      if (secret === undefined) source = `secret binding "${names.join('", "')}"`
      const fromEnv = secret === undefined ? secretsFrom(env as Record<string, unknown>, names) : []
      if (secret === undefined && fromEnv.length === 0) {
        throw new TypeError(`it is missing or empty. Set it with \`npx wrangler secret put ${names[0]}\` (or in .dev.vars for wrangler dev).`)
      }
      return createFetchHandler({ ...rest, secret: secret ?? fromEnv })
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error)
      // Never a silent pass: every delivery is answered 500, so the sender retries until it is fixed.
      return async () => {
        console.error(`svc-webhooks/cloudflare: cannot receive webhooks (${source}): ${why}`)
        return toResponse(errorResponse(error))
      }
    }
  }
  return {
    fetch(request, env) {
      const key = typeof env === 'object' && env !== null ? env : handlers
      let handler = handlers.get(key)
      if (!handler) handlers.set(key, (handler = create(env)))
      return handler(request)
    },
  }
}
