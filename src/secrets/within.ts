/**
 * A deadline on a value that may be a promise: a secret source's read, a `secret` or `endpoint`
 * function, a service call in a rotation. The timer never outlives the answer.
 */

export const TIMED_OUT = Symbol('timed out')

/** `value` within `ms`, or {@link TIMED_OUT}; the timer never outlives the answer. */
export async function within<T>(value: Promise<T> | T, ms: number): Promise<T | typeof TIMED_OUT> {
  if (!(value instanceof Promise) && typeof (value as { then?: unknown } | null)?.then !== 'function') return value as T
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<typeof TIMED_OUT>((done) => (timer = setTimeout(() => done(TIMED_OUT), ms)))
  try {
    return await Promise.race([value, late])
  } finally {
    clearTimeout(timer)
  }
}
