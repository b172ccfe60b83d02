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

/**
 * Throws a TypeError naming `option` unless `value` is a number of milliseconds from 0 to `max`:
 * a wait that must end inside the sender's 10 s.
 *
 * @example
 * waitOption(engineWaitMs, '`engineWaitMs`', 9000) // "... must be 0 to 9000 ms: the sender waits 10 s."
 */
export function waitOption(value: unknown, option: string, max: number): void {
  // Number.isFinite is false for anything but a number.
  if (!Number.isFinite(value) || !((value as number) >= 0 && (value as number) <= max)) {
    throw new TypeError(`svc-webhooks: ${option} must be 0 to ${max} ms: the sender waits 10 s.`)
  }
}
