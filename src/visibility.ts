/**
 * Visible by default (DESIGN.md): with no options beyond `secret` and `on`, a refused or failed
 * delivery leaves a line in the log (its code, the delivery id when known, the fix; never the
 * body, the secret or an error message that could quote either), repeats of a code collapsed
 * into a summary per window (log-window.ts) so forged traffic cannot drive the log; startup warns
 * about an `on` key that is no known event type and a secret without its prefix; and the receiver
 * counts its consecutive failing answers to the sender, warning well before the sender disables
 * the endpoint at 20 (spec/service-api.md §6.3). `stats()` reads the same counters, exact.
 */
import { failureText, refusalFix, type AnswerText } from './answer-texts.js'
import type { WebhookAnswerCode, WebhookOutcome } from './answers.js'
import { isWebhookVerificationError } from './errors.js'
import { KNOWN_EVENT_TYPES } from './events.js'
import type { InboxStats } from './contracts/inbox.js'
import { createLogWindow, errorLabel, printable, printableId } from './log-window.js'
import { SECRET_PREFIX } from './options.js'
import type { EndpointWatchView } from './contracts/watch.js'

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
  /** Answers given since start, by code (every answer but `processed`): exact, however the log collapses them. */
  codes: Partial<Record<WebhookAnswerCode, number>>
  /**
   * Failing answers in a row that the sender saw too, as far as this process can tell: answers to
   * deliveries whose signature verified, and the receiver's own faults before verification (a
   * failed secret lookup, a body parsed before the route, an unexpected error). Refusals of
   * requests that did not verify are left out, as anyone can send those. The sender disables the
   * endpoint at 20.
   */
  consecutiveFailures: number
  /** The last failing answer counted in `consecutiveFailures`, if any. */
  lastFailure?: { status: number; code: string; at: number }
  /** The inbox's depth, oldest age, retrying and dead, when there is an inbox. */
  inbox?: InboxStats
  /** The service's view of the endpoint, when the receiver watches it (`watch`). */
  endpoint?: EndpointWatchView
}

/** The sender disables an endpoint after this many consecutive failures (spec §6.3). */
export const SENDER_DISABLES_AFTER = 20
/** The streak lengths that are warned about: well before the sender's 20. */
const STREAK_WARNINGS = new Set([5, 10, 15])
/**
 * Failures before verification that say something about this receiver, not about the request:
 * the sender's deliveries get them too. (A body that stops arriving, `body_timeout`, is about
 * the client that sent it.)
 */
const RECEIVER_FAULTS: ReadonlySet<string> = new Set(['secret_lookup_failed', 'body_already_parsed', 'internal_error'])

/**
 * Whether an answer counts in the failing streak: it was given to a delivery whose signature
 * verified (`invalid_json` is only found in a verified body), or it is the receiver's own fault.
 *
 * @example
 * seenBySender({ status: 401, code: 'invalid_signature' }) // false: anyone can send that
 * seenBySender({ status: 500, code: 'handler_failed', signatureVersion: 'v2' }) // true
 */
export function seenBySender(result: { status: number; code?: string; signatureVersion?: string }): boolean {
  return result.signatureVersion !== undefined || result.code === 'invalid_json' || (result.code !== undefined && RECEIVER_FAULTS.has(result.code))
}

/** Errors whose message svc-webhooks wrote and which quote no input. */
const OWN_ERRORS = new WeakSet<object>()

/**
 * An error whose message is ours and can go into a log line as is.
 *
 * @example
 * result.error = ownError('svc-webhooks: the handler outlasted `leaseMs`; ...')
 */
export function ownError(message: string): Error {
  const error = new Error(message)
  OWN_ERRORS.add(error)
  return error
}

/** An error made by {@link ownError}. */
function isOwnError(error: unknown): error is Error {
  return typeof error === 'object' && error !== null && OWN_ERRORS.has(error)
}

/**
 * What a log line says of an error: the message when svc-webhooks wrote it, else only the name
 * and code. A handler's or a client's message can quote the body (`JSON.parse` quotes its
 * input), and the body never reaches the log; `onResult` gets the whole error.
 *
 * @example
 * describeError(new SyntaxError('Unexpected token ... "secret text" is not valid JSON'))
 * // 'SyntaxError; its message is left to onResult, as it may quote the delivery'
 */
export function describeError(error: unknown): string {
  if (isWebhookVerificationError(error) || isOwnError(error)) return error.message
  if (!(error instanceof Error)) return `${errorLabel(error)}; see onResult for it`
  return `${errorLabel(error)}; its message is left to onResult, as it may quote the delivery`
}

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

/** The line logged for a result, or undefined when it is not worth one. Never the body, a secret, or an error message that could quote them. */
export function resultLine(result: {
  outcome: WebhookOutcome
  status: number
  code?: string
  id?: string
  endpoint?: string
  error?: unknown
}): (() => string) | undefined {
  // A refusal's line gives its error's message and the fix; a failure's (a 5xx row), its cause and fix.
  const failure = result.outcome === 'refused' ? undefined : failureText(result.outcome)
  if (result.outcome !== 'refused' && !failure && !(result.outcome === 'processed' && result.error !== undefined)) return undefined
  // Built only when written: under a flood, repeats of a kind are counted, never formatted.
  return () => lineOf(result, failure)
}

function lineOf(result: { outcome: WebhookOutcome; status: number; code?: string; id?: string; endpoint?: string; error?: unknown }, failure: AnswerText | undefined): string {
  // The endpoint of a refused request can be a name taken from its URL: escaped and capped.
  const endpoint = result.endpoint && result.endpoint !== 'default' ? `endpoint ${printable(result.endpoint)}` : undefined
  // The id of a refused request is as sent: printable, and at most one token (ids are parsed back by `resend --from-log`).
  const about = [result.id === undefined ? undefined : `delivery ${printableId(result.id)}`, endpoint].filter(Boolean).join(', ')
  const where = about ? ` (${about})` : ''
  if (result.outcome === 'refused') {
    // The error's message says what was wrong with this request, its cause's name what failed
    // underneath (a secret lookup's); the fix is the answers table's, printed only here.
    const { error } = result
    if (!isWebhookVerificationError(error)) return `svc-webhooks: ${result.status} ${result.code}${where}: an unexpected error (${describeError(error)}).`
    const why = error.cause === undefined ? error.message : `${error.message.replace(/\.$/, '')} (${errorLabel(error.cause)}).`
    return `svc-webhooks: ${result.status} ${result.code}${where}: ${why} Fix: ${refusalFix(error.code)}.`
  }
  if (failure) {
    const error = result.error === undefined ? '' : ` (${describeError(result.error)})`
    return `svc-webhooks: ${result.status} ${result.code}${where}: ${failure.cause}; ${failure.fix}.${error}`
  }
  // Ours (the handler outlasted its lease), or the store's: recording the completion failed.
  const but = isOwnError(result.error) ? result.error.message : `the store did not record it, so a retry may run it again (${describeError(result.error)})`
  return `svc-webhooks: 200 processed${where}, but: ${but}`
}

/** Counts answers by outcome and code, and the failing streak the sender saw; warns as the streak grows. */
export class AnswerCounter {
  readonly #answers: Partial<Record<WebhookOutcome, number>> = {}
  readonly #codes: Partial<Record<WebhookAnswerCode, number>> = {}
  #streak = 0
  #last: ReceiverStats['lastFailure']
  readonly #log: ((line: string) => void) | undefined

  constructor(log: ((line: string) => void) | undefined) {
    this.#log = log
  }

  /**
   * `streak`: whether the answer counts in the failing streak ({@link seenBySender}); an answer
   * that does not neither lengthens nor ends it. `now` is only read for a failing answer that
   * counts: a successful one costs no clock read.
   */
  count(outcome: WebhookOutcome, status: number, code: WebhookAnswerCode | undefined, streak: boolean, now: () => number): void {
    this.#answers[outcome] = (this.#answers[outcome] ?? 0) + 1
    if (code !== undefined) this.#codes[code] = (this.#codes[code] ?? 0) + 1
    if (!streak) return
    if (status < 300) {
      this.#streak = 0
      return
    }
    this.#streak++
    this.#last = { status, code: code ?? String(status), at: now() }
    if (this.#log && STREAK_WARNINGS.has(this.#streak)) {
      this.#log(
        `svc-webhooks: ${this.#streak} failing answers in a row (last: ${status} ${this.#last.code}), counting signed deliveries and this receiver's own faults. ` +
          `The sender disables the endpoint after ${SENDER_DISABLES_AFTER} consecutive failures; fix the cause above, or use \`inbox\` so handler failures answer 202. ` +
          'Not counted: refusals of unsigned or wrongly signed requests (a wrong secret shows in their own lines), nor failures only the sender sees.',
      )
    }
  }

  snapshot(): ReceiverStats {
    return {
      answers: { ...this.#answers },
      codes: { ...this.#codes },
      consecutiveFailures: this.#streak,
      ...(this.#last ? { lastFailure: { ...this.#last } } : {}),
    }
  }
}

/** Where a worker's or a consumer's lines go: see {@link lineSink}. */
export interface LineSink {
  /** A line of a fixed `kind`: the first of a window at once, its repeats counted into one summary. */
  say(kind: string, text: string, id?: string): void
  /** A line written as is (startup warnings: a handful, once). */
  once(line: string): void
  /** Writes the pending summaries now (a stop, the end of a batch). */
  flush(): void
}

/**
 * The lines of an inbox worker or a Queue consumer, as visible and as bounded as the receiver's:
 * `log` (default `console.warn`, `false` for none) behind a log window keyed by `component` and
 * kind, so a flood of failing deliveries writes a few lines and a count; a throwing `log` is
 * swallowed.
 *
 * @example
 * const lines = lineSink(options.log, 'inbox worker', Date.now)
 * lines.say('dead', `delivery ${id} went to the dead letters: ...`, id)
 */
export function lineSink(log: WebhookLog | undefined, component: string, now: () => number): LineSink {
  const out = resolveLog(log)
  if (!out) return { say: () => undefined, once: () => undefined, flush: () => undefined }
  const safe = (line: string): void => callHook(out, line)
  const window = createLogWindow(safe, { now, hint: 'Each one is passed to onResult.' })
  return {
    say: (kind, text, id) => window.write(`${component}: ${kind}`, `svc-webhooks: ${component}: ${text}`, id),
    once: safe,
    flush: () => window.flush(),
  }
}
