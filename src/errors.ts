/**
 * The one error class of svc-webhooks: a literal-union `code`, the HTTP `status` the receiver
 * answers with (its row of the answers table, src/answers.ts), and a message that says how to fix
 * the problem in this request's terms. Messages never contain the secret, an expected signature
 * or the body (spec/service-api.md §6.2; DESIGN.md rule 3).
 */
import { DEFAULT_ANSWERS, ERROR_STATUS, type AnswerName, type WebhookErrorCode, type WebhookResponse } from './answers.js'

// The codes and their statuses are rows of the answers table; exported here as before.
export { ERROR_STATUS, type WebhookErrorCode }

const BRAND = Symbol.for('svc-webhooks.WebhookVerificationError')

/**
 * Why a delivery was refused. `status` is the HTTP status to answer with; tests and callers
 * should branch on `code`, not on the message.
 *
 * @example
 * try {
 *   await verifyWebhook({ body, headers }, { secret })
 * } catch (err) {
 *   if (isWebhookVerificationError(err)) return new Response(null, { status: err.status })
 *   throw err
 * }
 */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError'
  readonly code: WebhookErrorCode
  readonly status: number

  constructor(code: WebhookErrorCode, message: string, options?: { cause?: unknown }) {
    // No stack trace: a refusal is an answer to a request, not a fault in the code, and capturing
    // one costs more than the HMAC (about 10 µs in a server's call depth), which would let forged
    // requests cost more to refuse than genuine ones to accept. The message says what to fix.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      super(message, options)
    } finally {
      Error.stackTraceLimit = limit
    }
    this.code = code
    this.status = ERROR_STATUS[code]
  }

  /**
   * `instanceof` true for an error thrown by any copy of the package: the core entry and each
   * adapter are built as files of their own, so an adapter's refusals come from its own copy.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // A subclass keeps the ordinary check: only the class itself answers by the brand.
    return this === WebhookVerificationError ? isWebhookVerificationError(value) : super[Symbol.hasInstance](value)
  }
}

// On the prototype, not on each error: a copy of the package in another realm brands its own.
Object.defineProperty(WebhookVerificationError.prototype, BRAND, { value: true })

/**
 * Cross-realm guard: true for errors thrown by any copy of svc-webhooks (ESM and CJS builds,
 * workers, vm contexts), where `instanceof` can be false.
 *
 * @example
 * if (isWebhookVerificationError(err)) console.warn('refused', err.code)
 */
export function isWebhookVerificationError(value: unknown): value is WebhookVerificationError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true
}

/** The answer's name for an error: a verification error's own code, anything else `internal_error`. */
export function answerNameOf(error: unknown): AnswerName {
  return isWebhookVerificationError(error) ? error.code : 'internal_error'
}

/**
 * Turns any error thrown while receiving into the answer: a verification error's own status
 * and code, anything else 500 `internal_error` (retried by the sender).
 *
 * @example
 * const res = errorResponse(err) // { status: 413, body: '{"ok":false,"code":"body_too_large"}' }
 */
export function errorResponse(error: unknown): WebhookResponse {
  return DEFAULT_ANSWERS[answerNameOf(error)]
}
