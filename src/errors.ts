/**
 * The one error class of svc-webhooks: a literal-union `code`, the HTTP `status` the receiver
 * answers with, and a message that says how to fix the problem. Messages never contain the
 * secret, an expected signature or the body (spec/service-api.md §6.2; DESIGN.md rule 3).
 */

/** Every reason a delivery can be refused, with the status it is answered with. */
export const ERROR_STATUS = {
  /** The raw bytes are gone: a framework parsed the body first. A mounting bug: 500 so the sender retries once it is fixed. */
  body_already_parsed: 500,
  /** The body exceeds `maxBodyBytes`. */
  body_too_large: 413,
  /** `svc-webhook-id` is absent. */
  missing_id: 400,
  /** `svc-webhook-id` is empty, repeated, too long or holds characters a delivery id never has. */
  invalid_id: 400,
  /** `svc-webhook-timestamp` is absent. */
  missing_timestamp: 400,
  /** `svc-webhook-timestamp` is not decimal Unix seconds. */
  invalid_timestamp: 400,
  /** The timestamp is more than `toleranceSeconds` in the past. */
  timestamp_too_old: 401,
  /** The timestamp is more than `toleranceSeconds` in the future. */
  timestamp_in_future: 401,
  /** No signature header of an accepted scheme. */
  missing_signature: 401,
  /** The delivery carries only a v1 signature and `allowV1` is off. */
  v1_not_allowed: 401,
  /** No signature matched any configured secret. */
  invalid_signature: 401,
  /** The verified body is not UTF-8 JSON, or not an object with a string `event`. */
  invalid_json: 400,
  /**
   * The body was still arriving when the read deadline (`bodyTimeoutMs`) passed. 503 so the
   * sender retries: a 408 would be a permanent 4xx to it (spec/service-api.md §6.3).
   */
  body_timeout: 503,
  /** Many endpoints, one receiver: the `secret` lookup found no secret for this request. */
  unknown_endpoint: 404,
  /**
   * The `secret` lookup threw or rejected (a database or vault down), or a secret source could not
   * be read in time or holds an unusable value. 503 so the sender retries.
   */
  secret_lookup_failed: 503,
  /**
   * No signature matched a secret source's secrets, even after re-reading it, while it says a
   * secret change is in progress (`pendingUntil`: a rotation, or an endpoint whose secret is not
   * stored yet). 503 with `Retry-After`, never 401, so the sender comes back once it is stored.
   */
  secret_pending: 503,
} as const

/** The `code` of a {@link WebhookVerificationError}. */
export type WebhookErrorCode = keyof typeof ERROR_STATUS

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
    super(message, options)
    this.code = code
    this.status = ERROR_STATUS[code]
    Object.defineProperty(this, BRAND, { value: true })
  }
}

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
