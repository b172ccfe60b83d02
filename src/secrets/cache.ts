/**
 * Reading a secret source (src/secrets/contract.ts) on the request path, for every entry alike:
 * the state read through a cache (keys imported once per state), refreshed in the background,
 * re-read on a signature mismatch (single-flight, spaced, and only a read that started after the
 * mismatch counts), and the pending rules: each pending mark is timed on this receiver's own clock
 * from the read that first saw its id (never from a time another host wrote), bounded by
 * `maxPendingMs`; a source that cannot be read or holds garbage is turned into a 503 that the
 * sender retries. A cached state costs a clock read and two field reads per request.
 */
import { isWebhookVerificationError, WebhookVerificationError } from '../errors.js'
import { stateProblem, type PendingMark, type SecretSource, type SecretState } from './contract.js'
import { importSecrets, type SecretRecheck, type SourceSecretSet } from './list.js'
import { TIMED_OUT, within } from './within.js'

export type { SourceSecretSet } from './list.js'

/** How a receiver reads its secret sources: from the verification options, shared by every source of one options object. */
export interface SourceSettings {
  /** A cached state older than this is re-read in the background. */
  refreshMs: number
  /** Least time between the starts of two re-reads after a mismatch. */
  rereadMs: number
  /** A read still pending after this long counts as failed. */
  readTimeoutMs: number
  /** Longest a pending mark is honoured, from the read that first saw it. */
  maxPendingMs: number
  /** Longest a mismatch is held while a change is pending, re-reading the source, before 503 `secret_pending`. */
  holdMs: number
  now: () => number
  /** Where "a refresh failed, serving the cached secrets" goes; the receiver sets its own `log`. */
  log: ((line: string) => void) | undefined
}

const noop = () => undefined
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms))

function unusable(problem: string): WebhookVerificationError {
  return new WebhookVerificationError('secret_lookup_failed', `The secret source holds an unusable value: ${problem} (the value is not shown).`)
}

/** A source's own error (src/stores/source-state.ts): its message quotes no stored value. */
const SOURCE_ERROR = 'SecretSourceError'

/** A read that failed; any other error than a source's own is named by the log line, from the `cause`. */
function unreadable(cause: unknown, timedOut: boolean): WebhookVerificationError {
  const own = cause instanceof Error && cause.name === SOURCE_ERROR
  const why = timedOut
    ? 'did not answer in time (secretReadTimeoutMs).'
    : own
      ? `failed: ${cause.message.replace(/^svc-webhooks: /, '').replace(/([^.?!])$/, '$1.')}`
      : 'failed.'
  return new WebhookVerificationError('secret_lookup_failed', `Reading the secret source ${why}`, timedOut ? undefined : { cause })
}

/**
 * One source as a receiver sees it. `current()` is the request path: the cached secrets, or the
 * first read. `recheck()` is the mismatch path: the secrets of a read that started after the call.
 *
 * @example
 * const cache = new SourceCache(source, settings)
 * const secrets = await cache.current()
 */
export class SourceCache implements SecretRecheck {
  /** The last good state, imported; undefined until a read succeeds. */
  private set: SourceSecretSet | undefined
  /** When the read that gave {@link set} started. */
  private readAt = 0
  /** When the last read started, good or not. */
  private lastStart = Number.NEGATIVE_INFINITY
  /** The last read's error while no state is cached: answered at once until the next read is due. */
  private lastError: WebhookVerificationError | undefined
  private reading: Promise<SourceSecretSet> | undefined
  /** The re-read queued behind {@link reading} and the spacing, shared by every mismatch that waits for it. */
  private next: Promise<SourceSecretSet> | undefined
  /** When this receiver first saw each pending mark (by id), on its own clock. */
  private firstSeen = new Map<string, number>()
  /** A state of the older form (`pendingUntil` alone): its value and when it was first seen. */
  private legacySeen: { value: number; at: number } | undefined
  /** A failed refresh was logged and no read has succeeded since. */
  private failing = false

  constructor(
    private readonly source: SecretSource,
    private readonly settings: SourceSettings,
  ) {}

  /** The cached secrets (a refresh started behind them when they are old), or the first read. */
  current(): SourceSecretSet | Promise<SourceSecretSet> {
    const set = this.set
    if (set === undefined) return this.first()
    const { now, refreshMs, rereadMs } = this.settings
    const at = now()
    // A refresh that failed is tried again after the re-read spacing, not on every request.
    if (at - this.readAt >= refreshMs && at - this.lastStart >= rereadMs && this.reading === undefined && this.next === undefined) {
      this.read().then(noop, (error: unknown) => this.refreshFailed(error))
    }
    return set
  }

  /**
   * The secrets of a read that started after this call, for a delivery that matched none of the
   * cached ones: a rotation written just after the read in flight began would be missed by it.
   * One such read at a time, at most one per `rereadMs`, shared by every caller waiting for it.
   */
  recheck(): Promise<SourceSecretSet> {
    if (this.next !== undefined) return this.next
    const next = this.queueRead()
    this.next = next
    return next
  }

  /** How long a pending mismatch is held in all (`pendingHoldMs`). */
  get holdMs(): number {
    return this.settings.holdMs
  }

  /** Whether a change is pending in `set`, on this receiver's clock: a mismatch against it is held, not refused. */
  holding(set: SourceSecretSet): boolean {
    return set.pendingUntil !== 0 && set.pendingUntil > this.settings.now()
  }

  /** The refusal for a delivery that matched none of `set` either: 503 `secret_pending` while a change is pending, else `mismatch`. */
  refusal(set: SourceSecretSet, mismatch: unknown): unknown {
    if (!this.holding(set)) return mismatch
    return new WebhookVerificationError('secret_pending', 'No signature matched the secret source, and a secret change is pending there.')
  }

  private first(): Promise<SourceSecretSet> {
    if (this.reading !== undefined) return this.reading
    // A source that just failed is not read again for every request.
    if (this.lastError !== undefined && this.settings.now() - this.lastStart < this.settings.rereadMs) return Promise.reject(this.lastError)
    return this.read()
  }

  private async queueRead(): Promise<SourceSecretSet> {
    // Always a turn first: `next` must be set before it is cleared below.
    await this.reading?.then(noop, noop)
    const wait = this.lastStart + this.settings.rereadMs - this.settings.now()
    if (wait > 0) await sleep(wait)
    this.next = undefined
    return this.read()
  }

  private read(): Promise<SourceSecretSet> {
    const started = this.settings.now()
    this.lastStart = started
    const reading = this.load(started)
    this.reading = reading
    const done = () => {
      if (this.reading === reading) this.reading = undefined
    }
    reading.then(done, done)
    return reading
  }

  private async load(started: number): Promise<SourceSecretSet> {
    let state: unknown
    try {
      state = await within(this.source.read(), this.settings.readTimeoutMs)
    } catch (error) {
      throw this.failed(unreadable(error, false))
    }
    if (state === TIMED_OUT) throw this.failed(unreadable(undefined, true))
    const problem = stateProblem(state)
    if (problem !== undefined) throw this.failed(unusable(problem))
    const { secrets, pendingUntil, pending: marks } = state as SecretState & { pendingUntil?: number | null; pending?: readonly PendingMark[] | null }
    const at = this.settings.now()
    let pending = this.pendingOf(marks ?? [], pendingUntil ?? undefined, at)
    if (pending <= at) pending = 0
    if (secrets.length === 0 && pending <= at) {
      throw this.failed(unusable('`secrets` is empty and no change is pending'))
    }
    const previous = this.set
    let set: SourceSecretSet
    if (previous !== undefined && previous.pendingUntil === pending && sameSecrets(previous.secrets, secrets)) set = previous
    else {
      // The keys are imported once per list of secrets: a change of `pendingUntil` alone keeps them.
      const imported = previous !== undefined && sameSecrets(previous.secrets, secrets) ? previous : { ...importSecrets(secrets), secrets: [...secrets] }
      set = { count: imported.count, keys: imported.keys, unprefixed: imported.unprefixed, secrets: imported.secrets, source: this, pendingUntil: pending }
    }
    this.set = set
    this.readAt = started
    this.lastError = undefined
    if (this.failing) {
      this.failing = false
      this.say('svc-webhooks: the secret source answers again; its secrets are current.')
    }
    return set
  }

  /**
   * Until when (on this clock) a mismatch is held for these marks: each mark for its own `forMs`
   * (at most `maxPendingMs`) from the read that first saw its id. A new id starts a new window,
   * so a mark seen before never shortens a later one; ids no longer in the source are forgotten.
   * A state of the older form is timed by its `pendingUntil`, from when that value was first seen.
   */
  private pendingOf(marks: readonly PendingMark[], pendingUntil: number | undefined, at: number): number {
    const { maxPendingMs } = this.settings
    if (marks.length > 0 || pendingUntil === undefined) {
      this.legacySeen = undefined
      const seen = new Map<string, number>()
      let until = 0
      for (const mark of marks) {
        const first = this.firstSeen.get(mark.id) ?? at
        seen.set(mark.id, first)
        until = Math.max(until, first + Math.min(mark.forMs, maxPendingMs))
      }
      this.firstSeen = seen
      return until
    }
    this.firstSeen.clear()
    if (this.legacySeen?.value !== pendingUntil) this.legacySeen = { value: pendingUntil, at }
    return pendingUntil > at ? Math.min(pendingUntil, this.legacySeen.at + maxPendingMs) : 0
  }

  private failed(error: WebhookVerificationError): WebhookVerificationError {
    if (this.set === undefined) this.lastError = error
    return error
  }

  /** A background refresh failed: the cached secrets stay in use, and it is said once until a read succeeds. */
  private refreshFailed(error: unknown): void {
    if (this.failing) return
    this.failing = true
    // Every read's failure is a refusal made in load(); anything else is a fault of this file.
    const why = isWebhookVerificationError(error) ? `${error.message}${nameOf(error.cause)}` : 'An unexpected error.'
    this.say(`svc-webhooks: refreshing the secret source failed; the secrets read before stay in use until it answers. ${why}`)
  }

  /** A line to the receiver's `log`; a `log` that throws changes nothing here. */
  private say(line: string): void {
    try {
      this.settings.log?.(line)
    } catch {
      // Swallowed on purpose: a logging failure must not fail a read.
    }
  }
}

/**
 * The name of the error a read failed with, never its message (it may quote what the source
 * holds); only word characters, so it cannot forge a line.
 */
function nameOf(cause: unknown): string {
  return cause instanceof Error && cause.name !== SOURCE_ERROR ? ` (${cause.name.replace(/[^\w.$-]/g, '?').slice(0, 60)})` : ''
}

function sameSecrets(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}
