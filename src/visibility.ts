/**
 * Visible by default (DESIGN.md): with no options beyond `secret` and `on`, a refused or failed
 * delivery leaves one line in the log (its code, the delivery id when known, the fix; never the
 * body or the secret), startup warns about an `on` key that is no known event type and a secret
 * without its prefix, and the receiver counts its consecutive failing answers, warning well
 * before the sender disables the endpoint at 20 (spec/service-api.md §6.3). `stats()` reads the
 * same counters.
 */
import type { WebhookOutcome } from './answers.js'
import { isWebhookVerificationError } from './errors.js'
import { KNOWN_EVENT_TYPES } from './events.js'
import type { InboxStats } from './inbox/inbox.js'
import { SECRET_PREFIX } from './options.js'

/**
 * Calls a user's hook (`onResult`), sync or async: a throw or a rejection is swallowed, so a
 * logging hook can never change an answer, stop a worker, or become an unhandled rejection.
 */
export function callHook<T>(hook: ((value: T) => unknown) | undefined, value: T): void {
  if (!hook) return
  try {
    const returned = hook(value)
    if (returned !== null && typeof returned === 'object' && typeof (returned as Promise<unknown>).then === 'function') {
      ;(returned as Promise<unknown>).then(undefined, () => undefined)
    }
  } catch {
    // Swallowed on purpose: see above.
  }
}

/** Where the receiver's lines go: a function taking one line, or `false` for none. */
export type WebhookLog = false | ((line: string) => void)

/** What a health endpoint reads: answers by outcome, the failing streak, and the inbox's figures. */
export interface ReceiverStats {
  /** Answers given since start, by outcome. */
  answers: Partial<Record<WebhookOutcome, number>>
  /** Failing answers (any non-2xx) in a row: the sender disables the endpoint at 20. */
  consecutiveFailures: number
  /** The last failing answer, if any. */
  lastFailure?: { status: number; code: string; at: number }
  /** The inbox's depth, oldest age, retrying and dead, when there is an inbox. */
  inbox?: InboxStats
}

/** The sender disables an endpoint after this many consecutive failures (spec §6.3). */
export const SENDER_DISABLES_AFTER = 20
/** The streak lengths that are warned about: well before the sender's 20. */
const STREAK_WARNINGS = new Set([5, 10, 15])

const defaultLog = (line: string) => console.warn(line)

export function resolveLog(log: WebhookLog | undefined): ((line: string) => void) | undefined {
  if (log === undefined) return defaultLog
  if (log === false) return undefined
  if (typeof log !== 'function') throw new TypeError('svc-webhooks: `log` must be a function taking one line, or false.')
  return log
}

/** Levenshtein distance, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1))
      previous = current
    }
  }
  return row[b.length]!
}

/** The startup warnings: unknown `on` keys (a typo acknowledges every delivery unprocessed) and unprefixed secrets. */
export function startupWarnings(on: object | undefined, secrets: readonly unknown[] | undefined): string[] {
  const lines: string[] = []
  for (const type of Object.keys(on ?? {})) {
    if ((KNOWN_EVENT_TYPES as readonly string[]).includes(type)) continue
    const close = KNOWN_EVENT_TYPES.find((known) => distance(known, type) <= 2)
    lines.push(
      `svc-webhooks: \`on\` has a handler for "${type}", which is not an event type the service sends ` +
        `(${KNOWN_EVENT_TYPES.join(', ')})${close ? `. Did you mean "${close}"?` : '.'} ` +
        `Deliveries of a type with no handler are answered 200 ignored, so a misspelled key loses them.`,
    )
  }
  if (secrets?.some((s) => typeof s === 'string' && !s.startsWith(SECRET_PREFIX))) {
    lines.push(
      `svc-webhooks: a configured secret does not start with "${SECRET_PREFIX}". The HMAC key is the whole value the service ` +
        'returned, prefix included: every delivery will be refused 401 invalid_signature otherwise.',
    )
  }
  return lines
}

/** What to do about an outcome that is not a verification error. */
const ADVICE: Partial<Record<WebhookOutcome, string>> = {
  handler_failed: 'the handler threw; answered 500, so the sender retries. Fix the handler, or use `inbox` so failures are retried without failing the sender.',
  store_unavailable: 'the idempotency store did not answer; answered 503 with Retry-After. Is Redis/Postgres reachable?',
  inbox_unavailable: 'the inbox did not take the delivery; answered 503 with Retry-After. Is Redis/Postgres reachable?',
}

/** The line logged for a result, or undefined when it is not worth one. Never the body or a secret. */
export function resultLine(result: {
  outcome: WebhookOutcome
  status: number
  code?: string
  id?: string
  endpoint?: string
  error?: unknown
}): string | undefined {
  if (result.outcome !== 'refused' && !ADVICE[result.outcome] && !(result.outcome === 'processed' && result.error instanceof Error)) return undefined
  const where = `${result.id ? ` (delivery ${result.id}${result.endpoint && result.endpoint !== 'default' ? `, endpoint ${result.endpoint}` : ''})` : ''}`
  if (result.outcome === 'refused') {
    const why = isWebhookVerificationError(result.error) ? result.error.message : 'an unexpected error; see onResult for it.'
    return `svc-webhooks: ${result.status} ${result.code}${where}: ${why}`
  }
  const advice = ADVICE[result.outcome]
  if (advice) {
    const error = result.error instanceof Error ? ` (${result.error.name}: ${result.error.message.slice(0, 200)})` : ''
    return `svc-webhooks: ${result.status} ${result.code}${where}: ${advice}${error}`
  }
  if (result.outcome === 'processed' && result.error instanceof Error) {
    return `svc-webhooks: 200 processed${where}, but: ${result.error.message.slice(0, 300)}`
  }
  return undefined
}

/** Counts answers and the failing streak; warns as the streak grows. */
export class AnswerCounter {
  private readonly answers: Partial<Record<WebhookOutcome, number>> = {}
  private streak = 0
  private last: ReceiverStats['lastFailure']

  constructor(private readonly log: ((line: string) => void) | undefined) {}

  /** `now` is only read for a failing answer: a successful one costs no clock read. */
  count(outcome: WebhookOutcome, status: number, code: string | undefined, now: () => number): void {
    this.answers[outcome] = (this.answers[outcome] ?? 0) + 1
    if (status < 300) {
      this.streak = 0
      return
    }
    this.streak++
    this.last = { status, code: code ?? String(status), at: now() }
    if (this.log && STREAK_WARNINGS.has(this.streak)) {
      this.log(
        `svc-webhooks: ${this.streak} failing answers in a row (last: ${status} ${this.last.code}). The sender disables the endpoint ` +
          `after ${SENDER_DISABLES_AFTER} consecutive failures; fix the cause above, or use \`inbox\` so handler failures answer 202.`,
      )
    }
  }

  snapshot(): ReceiverStats {
    return { answers: { ...this.answers }, consecutiveFailures: this.streak, ...(this.last ? { lastFailure: { ...this.last } } : {}) }
  }
}
