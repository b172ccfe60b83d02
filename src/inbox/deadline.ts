/**
 * The bounded wait of the inbox engines: the stores' {@link withDeadline}, rejecting with an
 * {@link InboxError} whose `kind` says whether to try again (`unavailable`) or not (`refused`)
 * and whose `cause` is the client's error summed up as `{ name, message }`.
 */
import { withDeadline, type DeadlineOptions } from '../stores/deadline.js'
import { InboxError } from './inbox.js'

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
