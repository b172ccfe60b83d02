/**
 * `svc-webhooks/hono`: `webhooks(options)` middleware for Hono on any runtime (Node, Bun, Deno,
 * workerd): no `node:` import. Reads `c.req.raw` with the size limit enforced while streaming;
 * with `on` it answers with the core's receiver, without it sets `c.var.webhook` and calls
 * `next()`, refusing with Hono's HTTPException. All policy lives in the core.
 */
import type { MiddlewareHandler } from 'hono'
import { createMiddleware } from 'hono/factory'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { resolveVerifyOptions } from '../src/options.js'
import {
  errorResponse,
  isWebhookVerificationError,
  WebhookVerificationError,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookReceiverOptions,
} from '../src/index.js'
import { createFetchHandler, toResponse, verifyRequest } from './fetch.js'

/** Hono's Variables map after verify-only `webhooks(options)`: `c.var.webhook` / `c.get('webhook')`. */
export type WebhookVariables = { webhook: VerifiedDelivery }

const PARSED =
  'svc-webhooks/hono: the request body was already read (c.req.json(), a validator, or another middleware), ' +
  'so the raw bytes the signature covers are gone. Put webhooks() first on the route, before any body reader.'

function rawRequest(request: Request): Request {
  if (request.bodyUsed) throw new WebhookVerificationError('body_already_parsed', PARSED)
  return request
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
export function webhooks(options: WebhookReceiverOptions): MiddlewareHandler
export function webhooks(options: VerifyOptions): MiddlewareHandler<{ Variables: WebhookVariables }>
export function webhooks(options: VerifyOptions & { on?: WebhookReceiverOptions['on'] }): MiddlewareHandler {
  const { on } = options
  if (on) {
    const handle = createFetchHandler({ ...options, on })
    return async (c) => handle(rawRequest(c.req.raw))
  }
  resolveVerifyOptions(options) // invalid options throw now, not on the first request
  return createMiddleware<{ Variables: WebhookVariables }>(async (c, next) => {
    try {
      c.set('webhook', await verifyRequest(rawRequest(c.req.raw), options))
    } catch (error) {
      if (!isWebhookVerificationError(error) || error.code === 'body_already_parsed') throw error
      const res = toResponse(errorResponse(error))
      throw new HTTPException(error.status as ContentfulStatusCode, { res, message: error.message, cause: error })
    }
    await next()
  })
}
