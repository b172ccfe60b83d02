/**
 * The option checks every factory and constructor shares: invalid options are rejected when the
 * receiver, worker, store or inbox is created, never on a request (Hono's `jwt` throws at creation).
 */

/**
 * Throws a TypeError naming `option` unless `value` is a positive finite number of `unit`.
 *
 * @example
 * positiveOption(timeoutMs, 'RedisStore `timeoutMs`') // "... must be a positive number of milliseconds."
 * positiveOption(retryAfterSeconds, '`retryAfterSeconds`', 'seconds')
 */
export function positiveOption(value: unknown, option: string, unit = 'milliseconds'): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`svc-webhooks: ${option} must be a positive number of ${unit}.`)
  }
}
