/**
 * `svc-webhooks/koa`: `webhooks(options)` middleware for Koa 2 and 3. Supplies the core's request
 * path with Node's own request (`ctx.req`) and copies the core's answer to `ctx`; a body parser
 * mounted first (the raw bytes are gone) is refused by the core like any other answer. Imports
 * Koa's types only; all policy lives in the core.
 */
import type { Context, Middleware } from 'koa'
import { createWebhookReceiver, type WebhookReceiverOptions, type WebhookStatsSource, type WebhookTransport } from '../src/index.js'
import { nodeTransport } from './node.js'

/** Options of {@link webhooks}: the receiver's options, with Koa's `ctx` as the request. */
export type KoaWebhooksOptions = WebhookReceiverOptions<Context>

const koaTransport: WebhookTransport<Context> = {
  method: (ctx) => ctx.req.method,
  header: (ctx, name) => ctx.req.headers[name],
  body: (ctx, maxBodyBytes, timeoutMs) => nodeTransport.body(ctx.req, maxBodyBytes, timeoutMs),
  // A body parser mounted first read the stream, and left what it parsed on ctx.request.
  consumed: (ctx) => ctx.req.readableEnded || (ctx.request as { body?: unknown }).body !== undefined,
  discard: (ctx, timeoutMs) => nodeTransport.discard!(ctx.req, timeoutMs),
}

/**
 * Koa middleware that verifies, deduplicates, runs the handler and answers. Mount it on the
 * webhook's path, before any body parser.
 *
 * @example
 * app.use(async (ctx, next) => (ctx.path === '/webhooks/svc' ? hook(ctx, next) : next()))
 * const hook = webhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 */
export function webhooks(options: KoaWebhooksOptions): Middleware & WebhookStatsSource {
  const receiver = createWebhookReceiver(options)
  const middleware: Middleware = async (ctx) => {
    const answer = await receiver.receive(ctx, koaTransport)
    ctx.status = answer.status
    ctx.set(answer.headers)
    if (answer.close) ctx.set('connection', 'close')
    ctx.body = answer.body
  }
  return Object.assign(middleware, { stats: () => receiver.stats(), replay: receiver.replay })
}

export default webhooks
