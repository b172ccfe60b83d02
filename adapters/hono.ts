/**
 * `svc-webhooks/hono`: `webhooks(options)` middleware for Hono on any runtime, no `node:` import.
 * On @hono/node-server it reads Node's own request (`c.env.incoming`: no Web stream or Headers
 * object is built), elsewhere the Fetch `Request`. All policy lives in the core.
 */
import type { Context, MiddlewareHandler } from 'hono'
import { createMiddleware } from 'hono/factory'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { createWebhookReceiver, discardNodeBody, readNodeBody, readRequestBody, type NodeBodyStream, type VerifiedDelivery, type VerifyOptions } from '../src/index.js'
import type { WebhookHandlers, WebhookInboxProducer, WebhookLog, WebhookReceiverOptions, WebhookStatsSource, WebhookTransport } from '../src/index.js'
import { createVerifier } from '../src/verify-only.js'
import { toResponse } from './fetch.js'

/** Hono's Variables map after verify-only `webhooks(options)`: `c.var.webhook` / `c.get('webhook')`. */
export type WebhookVariables = { webhook: VerifiedDelivery }

/** Node's request as @hono/node-server passes it in `c.env.incoming`. */
type NodeIncoming = NodeBodyStream & { headers: Record<string, string | string[] | undefined>; readableDidRead?: boolean }

function incomingOf(c: Context): NodeIncoming | undefined {
  const incoming = (c.env as { incoming?: NodeIncoming } | undefined)?.incoming
  return incoming && typeof incoming.on === 'function' && typeof incoming.headers === 'object' ? incoming : undefined
}

/** Node's request when there is one, the Fetch `Request` otherwise. A body read before (c.req.json(), a validator) is consumed. */
const honoTransport: WebhookTransport<Context> = {
  method: (c) => c.req.method,
  header: (c, name, incoming = incomingOf(c)) => (incoming ? incoming.headers[name] : (c.req.raw.headers.get(name) ?? undefined)),
  body: (c, max, timeoutMs, incoming = incomingOf(c)) => (incoming ? readNodeBody(incoming, max, timeoutMs) : readRequestBody(c.req.raw, max, timeoutMs)),
  consumed: (c, incoming = incomingOf(c)) => (incoming ? incoming.readableDidRead === true : c.req.raw.bodyUsed),
  discard: (c, timeoutMs, incoming = incomingOf(c)) => void (incoming && discardNodeBody(incoming, timeoutMs)),
}

/**
 * Hono middleware. With `on`, it verifies, deduplicates, runs the handler and answers. Without
 * `on`, it verifies and sets `c.var.webhook`; a refusal is thrown as an `HTTPException` whose
 * response is the core's answer (status and JSON body), its `cause` the refusal.
 *
 * @example
 * app.post('/webhooks/svc', webhooks({ secret: env.SVC_WEBHOOK_SECRET }), (c) => {
 *   const { event } = c.var.webhook
 *   return c.json({ ok: true })
 * })
 */
export function webhooks(options: WebhookReceiverOptions<Context> & ({ on: WebhookHandlers } | { inbox: WebhookInboxProducer })): MiddlewareHandler & WebhookStatsSource
export function webhooks(options: VerifyOptions<Context> & { log?: WebhookLog }): MiddlewareHandler<{ Variables: WebhookVariables }>
export function webhooks(options: VerifyOptions<Context> & { on?: WebhookHandlers; inbox?: WebhookInboxProducer; log?: WebhookLog }): MiddlewareHandler {
  if (options.on !== undefined || options.inbox !== undefined) {
    const receiver = createWebhookReceiver(options as WebhookReceiverOptions<Context>)
    const middleware: MiddlewareHandler = async (c) => toResponse(await receiver.receive(c, honoTransport))
    return Object.assign(middleware, { stats: () => receiver.stats(), replay: receiver.replay })
  }
  const verify = createVerifier(options)
  return createMiddleware<{ Variables: WebhookVariables }>(async (c, next) => {
    const { delivery, error, answer } = await verify(c, honoTransport)
    if (answer) throw new HTTPException(answer.status as ContentfulStatusCode, { res: toResponse(answer), message: (error as Error)?.message, cause: error })
    c.set('webhook', delivery!)
    await next()
  })
}
