/**
 * The bounded wait shared by the stores and inboxes that talk to a server (Redis, Postgres):
 * retry an idempotent operation while the server restarts, but answer within `timeoutMs` whatever
 * the client library does, so the receiver can send 503 well inside the sender's 10 s
 * (spec/service-api.md §6.3 rule 1) instead of hanging on a client's offline queue. An error the
 * server answered and that repeating will not fix (a value it cannot store, out of memory) is
 * answered at once instead of being retried until the deadline and reported as unreachable.
 *
 * {@link inboxDeadline} is the inboxes' form: it rejects with an InboxError whose `kind` says
 * whether to try again.
 */
import { InboxError } from '../contracts/inbox.js'

/** First pause between attempts; doubles up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 25
const MAX_PAUSE_MS = 250
/** Longest server message kept in an error: enough to say what was refused, never a whole value. */
const MAX_MESSAGE = 300

/** Why an operation failed: `unavailable` (try again later) or `refused` (repeating will not fix it). */
export type FailureKind = 'unavailable' | 'refused'

/** What {@link withDeadline} may be told besides the attempt. */
export interface DeadlineOptions<T> {
  /** Receives the value of an attempt that resolved after the deadline, so a late claim or take can be undone. */
  onLate?: (value: T) => void
  /**
   * Whether a rejection is a refusal that repeating will not fix; it then fails the call at once
   * (no retry). Default: every rejection is retried until the deadline.
   */
  refused?: (error: unknown) => boolean
  /**
   * Builds the rejection from the kind, the message and the client's error summed up as
   * `{ name, message }`. Default: an `Error` whose `cause` is the client's error itself.
   */
  fail?: (kind: FailureKind, message: string, cause: ErrorSummary | undefined) => Error
}

/** A client's error reduced to what may be shown: its name and its (capped) message, never its command or arguments. */
export interface ErrorSummary {
  name: string
  message: string
}

/**
 * `error` as `{ name, message }`, the message capped: a client's error object carries the command
 * and its arguments (ioredis' `command.args`, a delivery's body among them), which must never
 * reach a hook or a log line.
 *
 * @example
 * new InboxError('refused', 'RedisInbox.append', 'refused', { cause: summarize(error) })
 */
export function summarize(error: unknown): ErrorSummary {
  if (error instanceof Error) {
    const message = typeof error.message === 'string' ? error.message : ''
    return { name: typeof error.name === 'string' ? error.name : 'Error', message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message }
  }
  return { name: typeof error, message: '' }
}

/** A server's message set inside a sentence: without its own final period. */
const sentence = (message: string) => message.replace(/\.+$/, '')

/**
 * Runs `attempt` until it resolves, retrying rejections with a short backoff, and rejects once
 * `timeoutMs` has passed (`unavailable`), or at once on a rejection `options.refused` recognises
 * (`refused`). Every attempt must be idempotent (the stores' scripts and statements are: a
 * repeated claim by the same owner is still that owner's claim). An attempt still pending at the
 * deadline may resolve later: `options.onLate` receives that value, so a late claim can be undone;
 * whatever `onLate` throws is dropped (nobody is waiting for it any more).
 *
 * @example
 * const state = await withDeadline('RedisStore.claim', 2000, () => run(CLAIM, key, args), {
 *   onLate: (late) => { if (late === 'claimed') void quietly(() => store.release(key, owner)) },
 * })
 */
export function withDeadline<T>(what: string, timeoutMs: number, attempt: () => Promise<T>, options: DeadlineOptions<T> = {}): Promise<T> {
  const { onLate, refused, fail = (_kind, message, _summary) => new Error(message, { cause: lastError }) } = options
  let lastError: unknown
  return new Promise<T>((resolve, reject) => {
    const deadline = Date.now() + timeoutMs
    let settled = false
    let pause = FIRST_PAUSE_MS
    let retry: ReturnType<typeof setTimeout> | undefined
    const timer = setTimeout(() => {
      settled = true
      if (retry !== undefined) clearTimeout(retry)
      const summary = lastError === undefined ? undefined : summarize(lastError)
      const reason = summary ? ` (last error: ${sentence(summary.message)})` : ''
      reject(fail('unavailable', `svc-webhooks: ${what} got no answer within ${timeoutMs} ms${reason}. Is the server reachable?`, summary))
    }, timeoutMs)

    const late = (value: T): void => {
      try {
        onLate?.(value)
      } catch {
        // The caller has its answer already; a late value that cannot be read is left to its lease.
      }
    }

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
          if (settled) return late(value)
          settled = true
          clearTimeout(timer)
          resolve(value)
        },
        (error: unknown) => {
          if (settled) return
          lastError = error
          if (refused?.(error)) {
            settled = true
            clearTimeout(timer)
            const summary = summarize(error)
            reject(fail('refused', `svc-webhooks: ${what} was refused by the server: ${sentence(summary.message)}. Repeating the same call will not succeed.`, summary))
            return
          }
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
 * Runs one engine operation within `timeoutMs`: `refused` recognises the server's refusals
 * (answered at once), everything else is retried until the deadline.
 *
 * @example
 * const reply = await inboxDeadline('RedisInbox.take', 2000, () => run(TAKE, due, args), { refused: isRedisRefusal, onLate: handBack })
 */
export function inboxDeadline<T>(operation: string, timeoutMs: number, attempt: () => Promise<T>, options: Omit<DeadlineOptions<T>, 'fail'>): Promise<T> {
  return withDeadline(operation, timeoutMs, attempt, {
    ...options,
    fail: (kind, message, cause) => new InboxError(kind, operation, message, cause ? { cause } : undefined),
  })
}

/**
 * Why a settings check failed, for a warning line: the error's message without the package prefix
 * (an InboxError's message names the operation and the server's answer, never arguments).
 *
 * @example
 * `could not check the settings (${unchecked(error)})`
 */
export function unchecked(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/^svc-webhooks: /, '')
}

/**
 * How long one operation may wait: until the caller's `deadline` (wall-clock ms) when it gave one,
 * so a request's store and inbox calls share the receiver's single wait inside the sender's 10 s
 * and a failover shorter than that wait is ridden out in one call; else the engine's own
 * `timeoutMs`. Never less than {@link LAST_CHANCE_MS} (or `timeoutMs` when shorter): a completion
 * after a handler that outlasted the deadline must still be recorded (the 2xx is owed anyway, and
 * a completion given no time is a run repeated on the next resend), and a healthy server answers
 * in milliseconds; the answer then comes at most that much after the deadline.
 *
 * @example
 * withDeadline('RedisStore.claim', budget(this.timeoutMs, deadline), attempt)
 */
export function budget(timeoutMs: number, deadline: number | undefined): number {
  if (deadline === undefined || !Number.isFinite(deadline)) return timeoutMs
  return Math.max(deadline - Date.now(), Math.min(timeoutMs, LAST_CHANCE_MS))
}

/** The least an operation given a deadline may wait, for {@link budget}. */
const LAST_CHANCE_MS = 1000
