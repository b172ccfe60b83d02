/**
 * `svc-webhooks/express`: `webhooks(options)` for Express 4 and 5, over the Node transport (which
 * also takes the Buffer `express.raw()` left). Imports Express's types only; policy is the core's.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { createWebhookReceiver, type VerifiedDelivery, type VerifyOptions, type WebhookReceiverOptions, type WebhookStatsSource } from '../src/index.js'
import { createVerifier } from '../src/verify-only.js'
import { nodeTransport, sendNode } from './node.js'

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by `webhooks(options)` in verify-only mode (no `on`). */
      webhook?: VerifiedDelivery
    }
  }
}

/** Options of {@link webhooks}: with `on` (or `inbox`), the middleware answers; without, it verifies only. */
export type ExpressWebhooksOptions = WebhookReceiverOptions<Request> | VerifyOptions<Request>

/**
 * Express middleware. With `on` (or `inbox`), it verifies, deduplicates, runs the handler and
 * answers. Without, it sets a typed `req.webhook` and calls `next()`; a refusal goes to
 * `next(err)` with `err.status` set. A body parsed first (express.json()) is 500 `body_already_parsed`.
 *
 * @example
 * app.post('/webhooks/svc', webhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * }))
 */
export function webhooks(options: ExpressWebhooksOptions): RequestHandler & Partial<WebhookStatsSource> {
  if (('on' in options && options.on !== undefined) || ('inbox' in options && options.inbox !== undefined)) {
    const receiver = createWebhookReceiver(options as WebhookReceiverOptions<Request>)
    const answer = async (req: Request, res: Response) => sendNode(res, await receiver.receive(req, nodeTransport))
    return Object.assign(answer, { stats: () => receiver.stats(), replay: receiver.replay })
  }
  const verify = createVerifier(options)
  return async (req: Request, _res: Response, next: NextFunction) => {
    const verified = await verify(req, nodeTransport)
    if (verified.answer) return next(verified.error)
    req.webhook = verified.delivery
    next()
  }
}
