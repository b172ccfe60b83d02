/**
 * `svc-webhooks/hono`: `webhooks(options)` middleware for Hono on any runtime (Node, Bun, Deno,
 * workerd): no `node:` import. On @hono/node-server it reads Node's own request (`c.env.incoming`:
 * no Web stream or Headers object is built), elsewhere the Fetch `Request`. With `on` it answers
 * with the core's receiver; without, it sets `c.var.webhook` and calls `next()`, refusing with
 * Hono's HTTPException. All policy lives in the core.
 */
import type { Context, MiddlewareHandler } from 'hono'
import { createMiddleware } from 'hono/factory'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { resolveVerifyOptions } from '../src/options.js'
import {
  createWebhookReceiver,
  errorResponse,
  isWebhookVerificationError,
  discardNodeBody,
  readNodeBody,
  WebhookVerificationError,
  type NodeBodyStream,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookHandlers,
  type WebhookInboxProducer,
  type WebhookStatsSource,
  type WebhookReceiverOptions,
  type WebhookTransport,
} from '../src/index.js'
import { verifyTransported } from '../src/transport.js'
import { fetchTransport, toResponse } from './fetch.js'

/** Hono's Variables map after verify-only `webhooks(options)`: `c.var.webhook` / `c.get('webhook')`. */
export type WebhookVariables = { webhook: VerifiedDelivery }

const PARSED =
  'svc-webhooks/hono: the request body was already read (c.req.json(), a validator, or another middleware), ' +
  'so the raw bytes the signature covers are gone. Put webhooks() first on the route, before any body reader.'

/** Node's request as @hono/node-server passes it in `c.env.incoming`. */
type NodeIncoming = NodeBodyStream & { method?: string; headers: Record<string, string | string[] | undefined>; readableDidRead?: boolean }

function incomingOf(c: Context): NodeIncoming | undefined {
  const incoming = (c.env as { incoming?: NodeIncoming } | undefined)?.incoming
  return incoming && typeof incoming.on === 'function' && typeof incoming.headers === 'object' ? incoming : undefined
}

/** A body reader ran before us: the raw bytes are gone. */
function readBefore(c: Context): boolean {
  const incoming = incomingOf(c)
  return incoming ? incoming.readableDidRead === true : c.req.raw.bodyUsed
}

/** Node's request when there is one, the Fetch `Request` otherwise. */
const honoTransport: WebhookTransport<Context> = {
  method: (c) => c.req.method,
  header(c, name) {
    const incoming = incomingOf(c)
    return incoming ? incoming.headers[name] : fetchTransport.header(c.req.raw, name)
  },
  body(c, maxBodyBytes, timeoutMs) {
    const incoming = incomingOf(c)
    return incoming ? readNodeBody(incoming, maxBodyBytes, timeoutMs) : fetchTransport.body(c.req.raw, maxBodyBytes, timeoutMs)
  },
  discard(c, timeoutMs) {
    const incoming = incomingOf(c)
    if (incoming) discardNodeBody(incoming, timeoutMs)
  },
}

/**
 * Hono middleware. With `on`, it verifies, deduplicates, runs the handler and answers. Without
 * `on`, it verifies and sets `c.var.webhook`, refusing with an `HTTPException` (status and JSON
 * answer of the core). A body read before it is a programming error: thrown as is, to `app.onError`.
 *
 * @example
 * app.post('/webhooks/svc', webhooks({ secret: env.SVC_WEBHOOK_SECRET }), (c) => {
 *   const { event } = c.var.webhook
 *   return c.json({ ok: true })
 * })
 */
export function webhooks(options: WebhookReceiverOptions<Context> & ({ on: WebhookHandlers } | { inbox: WebhookInboxProducer })): MiddlewareHandler & WebhookStatsSource
export function webhooks(options: VerifyOptions<Context>): MiddlewareHandler<{ Variables: WebhookVariables }>
export function webhooks(options: VerifyOptions<Context> & { on?: WebhookReceiverOptions['on'] }): MiddlewareHandler {
  // With `on` or an `inbox` it answers; with neither it only verifies.
  if (options.on !== undefined || (options as WebhookReceiverOptions).inbox !== undefined) {
    const receiver = createWebhookReceiver(options as WebhookReceiverOptions<Context>)
    const middleware: MiddlewareHandler = async (c) => {
      if (readBefore(c)) throw new WebhookVerificationError('body_already_parsed', PARSED)
      return toResponse(await receiver.receive(c, honoTransport))
    }
    return Object.assign(middleware, { stats: () => receiver.stats() })
  }
  const opts = resolveVerifyOptions(options) // invalid options throw now, not on the first request
  return createMiddleware<{ Variables: WebhookVariables }>(async (c, next) => {
    if (readBefore(c)) throw new WebhookVerificationError('body_already_parsed', PARSED)
    try {
      c.set('webhook', await verifyTransported(c, honoTransport, opts))
    } catch (error) {
      honoTransport.discard!(c, opts.bodyTimeoutMs)
      if (!isWebhookVerificationError(error) || error.code === 'body_already_parsed') throw error
      const res = toResponse(errorResponse(error))
      throw new HTTPException(error.status as ContentfulStatusCode, { res, message: error.message, cause: error })
    }
    await next()
  })
}
