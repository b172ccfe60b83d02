/**
 * The bounded wait shared by the stores that talk to a server (Redis, Postgres): retry an
 * idempotent operation while the server restarts, but answer within `timeoutMs` whatever the
 * client library does, so the receiver can send 503 well inside the sender's 10 s
 * (spec/service-api.md §6.3 rule 1) instead of hanging on a client's offline queue.
 */

/** First pause between attempts; doubles up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 25
const MAX_PAUSE_MS = 250

/**
 * Runs `attempt` until it resolves, retrying rejections with a short backoff, and rejects once
 * `timeoutMs` has passed. Every attempt must be idempotent (the stores' scripts and statements
 * are: a repeated claim by the same owner is still that owner's claim). An attempt still pending
 * at the deadline may resolve later: `onLate` receives that value, so a late claim can be undone.
 *
 * @example
 * const state = await withDeadline('RedisStore.claim', 2000, () => run(CLAIM, key, args), (late) => {
 *   if (late === 'claimed') void quietly(() => store.release(key, owner))
 * })
 */
export function withDeadline<T>(
  what: string,
  timeoutMs: number,
  attempt: () => Promise<T>,
  onLate?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const deadline = Date.now() + timeoutMs
    let settled = false
    let lastError: unknown
    let pause = FIRST_PAUSE_MS
    let retry: ReturnType<typeof setTimeout> | undefined
    const timer = setTimeout(() => {
      settled = true
      if (retry !== undefined) clearTimeout(retry)
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : ''
      reject(new Error(`svc-webhooks: ${what} got no answer within ${timeoutMs} ms${reason}. Is the server reachable?`, { cause: lastError }))
    }, timeoutMs)

    const run = (): void => {
      retry = undefined
      let pending: Promise<T>
      try {
        pending = attempt()
      } catch (error) {
        pending = Promise.reject(error)
      }
      pending.then(
        (value) => {
          if (settled) {
            onLate?.(value)
            return
          }
          settled = true
          clearTimeout(timer)
          resolve(value)
        },
        (error: unknown) => {
          if (settled) return
          lastError = error
          const wait = Math.min(pause, deadline - Date.now())
          pause = Math.min(pause * 2, MAX_PAUSE_MS)
          // Past the deadline the timer above answers; no attempt is started after it.
          if (wait > 0) retry = setTimeout(run, wait)
        },
      )
    }
    run()
  })
}

/**
 * Throws a TypeError naming `option` unless `value` is a positive finite number.
 *
 * @example
 * positiveOption(timeoutMs, 'RedisStore timeoutMs')
 */
export function positiveOption(value: unknown, option: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`svc-webhooks: ${option} must be a positive number of milliseconds.`)
  }
}
