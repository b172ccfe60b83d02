/**
 * `svc-webhooks/express`: `webhooks(options)` middleware for Express 4 and 5. Supplies the core's
 * request path with Node's request (or the Buffer `express.raw()` left), then either writes the
 * core's answer (`on` given) or sets `req.webhook` and calls `next()` (verify-only). Imports
 * Express's types only; all policy lives in the core.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import {
  createWebhookReceiver,
  WebhookVerificationError,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookReceiverOptions,
  type WebhookStatsSource,
  type WebhookTransport,
} from '../src/index.js'
import { tooLarge } from '../src/input.js'
import { resolveVerifyOptions } from '../src/options.js'
import { verifyTransported } from '../src/transport.js'
import { nodeTransport, sendNode } from './node.js'

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by `webhooks(options)` in verify-only mode (no `on`). */
      webhook?: VerifiedDelivery
    }
  }
}

/** Options of {@link webhooks}: with `on`, the middleware answers; without, it verifies only. */
export type ExpressWebhooksOptions = WebhookReceiverOptions<Request> | VerifyOptions<Request>

const PARSED =
  'svc-webhooks/express (body_already_parsed): req.body was already parsed, so the raw bytes the signature covers are gone. ' +
  'Mount webhooks() before express.json() (or any body parser), e.g. app.post(path, webhooks(options)) ' +
  'above app.use(express.json()), or give this route express.raw({ type: "*/*" }).'

/** Node's request, or the Buffer `express.raw()` already read from it. */
const expressTransport: WebhookTransport<Request> = {
  ...(nodeTransport as unknown as WebhookTransport<Request>),
  body(req, maxBodyBytes, timeoutMs) {
    const body: unknown = req.body
    if (body instanceof Uint8Array) {
      if (body.byteLength > maxBodyBytes) throw tooLarge(maxBodyBytes)
      return body
    }
    if (parsedBefore(req)) throw new WebhookVerificationError('body_already_parsed', PARSED)
    return nodeTransport.body(req, maxBodyBytes, timeoutMs)
  },
}

/** A body parser ran before us: the raw bytes are gone. Express 4's body-parser sets `{}` when it skipped, so only a consumed stream counts. */
function parsedBefore(req: Request): boolean {
  const body: unknown = req.body
  if (body instanceof Uint8Array) return false
  return (body !== undefined && typeof body !== 'object') || req.readableEnded
}

/**
 * Express middleware. With `on`, it verifies, deduplicates, runs the handler and answers; without
 * `on`, it sets a typed `req.webhook` and calls `next()`, and refusals go to `next(err)` with
 * `err.status` set. A body parsed before it (express.json() mounted first) is answered 500
 * `{ ok: false, code: 'body_already_parsed' }` with `on` (and logged with the fix), sent to `next(err)` without.
 *
 * @example
 * app.post('/webhooks/svc', webhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * }))
 */
export function webhooks(options: ExpressWebhooksOptions): RequestHandler & Partial<WebhookStatsSource> {
  // With `on` or an `inbox` it answers; with neither it only verifies. Invalid options throw now.
  const answers = ('on' in options && options.on !== undefined) || ('inbox' in options && options.inbox !== undefined)
  const receiver = answers ? createWebhookReceiver(options as WebhookReceiverOptions<Request>) : undefined
  const opts = receiver ? undefined : resolveVerifyOptions(options)
  const middleware = async (req: Request, res: Response, next: NextFunction) => {
    // The receiver answers a parsed body itself, as the JSON row of the answers table (never
    // Express's HTML error page); verify-only mode hands every refusal to the app's error handler.
    if (receiver) return sendNode(res, await receiver.receive(req, expressTransport))
    if (req.method === 'POST' && parsedBefore(req)) return next(new WebhookVerificationError('body_already_parsed', PARSED))
    try {
      req.webhook = await verifyTransported(req, expressTransport, opts!)
    } catch (error) {
      nodeTransport.discard!(req, opts!.bodyTimeoutMs)
      return next(error)
    }
    next()
  }
  // In receiver mode, `stats()` for a health endpoint.
  return receiver ? Object.assign(middleware, { stats: () => receiver.stats() }) : middleware
}
