/**
 * `svc-webhooks/express`: `webhooks(options)` middleware for Express 4 and 5. Reads the raw bytes
 * from the request stream (or takes the Buffer `express.raw()` left), then either answers with
 * the core's receiver (`on` given) or sets `req.webhook` and calls `next()` (verify-only).
 * Imports Express's types only; all policy lives in the core.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import {
  createWebhookReceiver,
  DEFAULT_MAX_BODY_BYTES,
  errorResponse,
  isWebhookVerificationError,
  readStreamBody,
  verifyWebhook,
  WebhookVerificationError,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookReceiverOptions,
} from '../src/index.js'
import { resolveVerifyOptions } from '../src/options.js'

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by `webhooks(options)` in verify-only mode (no `on`). */
      webhook?: VerifiedDelivery
    }
  }
}

/** Options of {@link webhooks}: with `on`, the middleware answers; without, it verifies only. */
export type ExpressWebhooksOptions = WebhookReceiverOptions | VerifyOptions

const PARSED =
  'svc-webhooks/express: req.body was already parsed, so the raw bytes the signature covers are gone. ' +
  'Mount webhooks() before express.json() (or any body parser), e.g. app.post(path, webhooks(options)) ' +
  'above app.use(express.json()), or give this route express.raw({ type: "*/*" }).'

async function rawBody(req: Request, maxBodyBytes: number): Promise<Uint8Array> {
  const body: unknown = req.body
  if (body instanceof Uint8Array) return body // express.raw(): a Buffer
  // Express 4's body-parser sets req.body = {} even when it skipped the request; only a consumed stream is fatal.
  if ((body !== undefined && typeof body !== 'object') || req.readableEnded) {
    throw new WebhookVerificationError('body_already_parsed', PARSED)
  }
  return readStreamBody(req, maxBodyBytes, req.headers['content-length'])
}

/**
 * Express middleware. With `on`, it verifies, deduplicates, runs the handler and answers; without
 * `on`, it sets a typed `req.webhook` and calls `next()`, and refusals go to `next(err)` with
 * `err.status` set. A body parsed before it (express.json() mounted first) is a 500 sent to `next(err)`.
 *
 * @example
 * app.post('/webhooks/svc', webhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * }))
 */
export function webhooks(options: ExpressWebhooksOptions): RequestHandler {
  const on = 'on' in options ? options.on : undefined
  // Invalid options throw now, not on the first request (the receiver checks its own).
  const receiver = on ? createWebhookReceiver({ ...options, on }) : undefined
  if (!receiver) resolveVerifyOptions(options)
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  return async (req: Request, res: Response, next: NextFunction) => {
    const { method, headers } = req
    try {
      const body = receiver && method !== 'POST' ? new Uint8Array(0) : await rawBody(req, maxBodyBytes)
      if (!receiver) {
        req.webhook = await verifyWebhook({ body, headers }, options)
        return next()
      }
      const answer = await receiver.handle({ method, body, headers })
      res.writeHead(answer.status, answer.headers).end(answer.body)
    } catch (error) {
      if (receiver && isWebhookVerificationError(error) && error.code !== 'body_already_parsed') {
        const answer = errorResponse(error)
        return void res.writeHead(answer.status, answer.headers).end(answer.body)
      }
      next(error)
    }
  }
}
