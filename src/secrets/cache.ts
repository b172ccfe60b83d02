/**
 * Reading a secret source (src/secrets/contract.ts) on the request path, for every entry alike:
 * the state read through a cache (keys imported once per state), refreshed in the background,
 * re-read on a signature mismatch (single-flight, spaced, and only a read that started after the
 * mismatch counts), and the pending rules: each pending mark is timed on this receiver's own clock
 * from the read that first saw its id (never from a time another host wrote), bounded by
 * `maxPendingMs`; a mismatch while a mark is pending is held while the source is re-read; a
 * source that cannot be read or holds garbage is turned into a 503 that the sender retries. A
 * cached state costs a clock read and two field reads per request.
 *
 * One function and its closure rather than a class: its state is local variables, which a
 * minifier renames, where a class's fields and methods keep their names in every Worker bundle.
 */
import { isWebhookVerificationError, WebhookVerificationError } from '../errors.js'
import { stateProblem, type PendingMark, type SecretSource, type SecretState } from './contract.js'
import { importSecrets, type SecretSet, type SourceSecretSet } from './list.js'
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
  /** Where "a refresh failed, serving the cached secrets" goes; the receiver sets its own `log` (read on each line). */
  log: ((line: string) => void) | undefined
}

/** One source as a receiver sees it. */
export interface SourceCache {
  /** The request path: the cached secrets (a refresh started behind them when they are old), or the first read. */
  current(): SourceSecretSet | Promise<SourceSecretSet>
}

const noop = () => undefined

/** A source's own error (src/stores/source-state.ts): its message quotes no stored value. */
const SOURCE_ERROR = 'SecretSourceError'

/** 503 `secret_lookup_failed`, the refusal a failed read or lookup ends in; the message never quotes what the source or lookup holds. */
export const lookupFailed = (message: string, cause?: unknown) => new WebhookVerificationError('secret_lookup_failed', message, cause === undefined ? undefined : { cause })

const unusable = (problem: string) => lookupFailed(`The secret source holds an unusable value: ${problem} (the value is not shown).`)

/** A signature mismatch (the only refusal a fresh read can change), as opposed to any other error. */
const isMismatch = (error: unknown) => isWebhookVerificationError(error) && error.code === 'invalid_signature'

/**
 * The cache of one source. Its sets carry `rematch`: a delivery that matched none of the cached
 * secrets is matched again against a read that started after it arrived (a rotation written just
 * after the read in flight began would be missed by that one), and while the read says a change
 * is pending, against each later read until one matches or the hold (`pendingHoldMs`, on a real
 * timer: it is the sender's real 10 s) runs out: then 503 `secret_pending`. A rotation whose call
 * takes a few seconds is then answered 2xx, not 503: each 503 counts toward the sender's 20.
 *
 * @example
 * const cache = createSourceCache(source, settings)
 * const secrets = await cache.current()
 */
export function createSourceCache(source: SecretSource, settings: SourceSettings): SourceCache {
  const { now, refreshMs, rereadMs, readTimeoutMs, maxPendingMs, holdMs } = settings
  /** The last good state, imported; undefined until a read succeeds. */
  let set: SourceSecretSet | undefined
  /** When the read that gave `set` started. */
  let readAt = 0
  /** When the last read started, good or not. */
  let lastStart = Number.NEGATIVE_INFINITY
  /** The last read's error while no state is cached: answered at once until the next read is due. */
  let lastError: WebhookVerificationError | undefined
  let reading: Promise<SourceSecretSet> | undefined
  /** The re-read queued behind `reading` and the spacing, shared by every mismatch that waits for it. */
  let next: Promise<SourceSecretSet> | undefined
  /** When this receiver first saw each pending mark (by id), on its own clock. */
  let firstSeen = new Map<string, number>()
  /** A state of the older form (`pendingUntil` alone): its value and when it was first seen. */
  let legacySeen: { value: number; at: number } | undefined
  /** A failed refresh was logged and no read has succeeded since. */
  let failing = false

  /** A line to the receiver's `log`; a `log` that throws changes nothing here. */
  const say = (line: string) => {
    try {
      settings.log?.(line)
    } catch {
      // Swallowed on purpose: a logging failure must not fail a read.
    }
  }

  const failed = (error: WebhookVerificationError) => {
    if (set === undefined) lastError = error
    return error
  }

  /** Whether a change is pending in `s`, on this receiver's clock: a mismatch against it is held, not refused. */
  const holding = (s: SourceSecretSet) => s.pendingUntil !== 0 && s.pendingUntil > now()

  const read = (): Promise<SourceSecretSet> => {
    const started = (lastStart = now())
    const current = load(started)
    reading = current
    const done = () => {
      if (reading === current) reading = undefined
    }
    current.then(done, done)
    return current
  }

  /**
   * The secrets of a read that started after this call. One such read at a time, at most one per
   * `rereadMs`, shared by every caller waiting for it.
   */
  const recheck = () => (next ??= queueRead())

  async function queueRead(): Promise<SourceSecretSet> {
    // Always a turn first: `next` must be set before it is cleared below.
    await reading?.then(noop, noop)
    const wait = lastStart + rereadMs - now()
    if (wait > 0) await new Promise((done) => setTimeout(done, wait))
    next = undefined
    return read()
  }

  async function load(started: number): Promise<SourceSecretSet> {
    let state: unknown
    try {
      state = await within(source.read(), readTimeoutMs)
    } catch (error) {
      const own = error instanceof Error && error.name === SOURCE_ERROR
      const why = own ? `failed: ${error.message.replace(/^svc-webhooks: /, '').replace(/([^.?!])$/, '$1.')}` : 'failed.'
      throw failed(lookupFailed(`Reading the secret source ${why}`, error))
    }
    if (state === TIMED_OUT) throw failed(lookupFailed('Reading the secret source did not answer in time (secretReadTimeoutMs).'))
    const problem = stateProblem(state)
    if (problem !== undefined) throw failed(unusable(problem))
    const { secrets, pendingUntil, pending: marks } = state as SecretState & { pendingUntil?: number | null; pending?: readonly PendingMark[] | null }
    const at = now()
    let pending = pendingOf(marks ?? [], pendingUntil ?? undefined, at)
    if (pending <= at) pending = 0
    if (secrets.length === 0 && pending === 0) throw failed(unusable('`secrets` is empty and no change is pending'))
    const same = set !== undefined && sameSecrets(set.secrets, secrets)
    // The keys are imported once per list of secrets: a change of `pendingUntil` alone keeps them.
    if (!same || set!.pendingUntil !== pending) {
      const imported = same ? set! : { ...importSecrets(secrets), secrets: [...secrets] }
      set = { keys: imported.keys, unprefixed: imported.unprefixed, secrets: imported.secrets, rematch, pendingUntil: pending }
    }
    readAt = started
    lastError = undefined
    if (failing) {
      failing = false
      say('svc-webhooks: the secret source answers again; its secrets are current.')
    }
    return set!
  }

  /**
   * Until when (on this clock) a mismatch is held for these marks: each mark for its own `forMs`
   * (at most `maxPendingMs`) from the read that first saw its id. A new id starts a new window,
   * so a mark seen before never shortens a later one; ids no longer in the source are forgotten.
   * A state of the older form is timed by its `pendingUntil`, from when that value was first seen.
   */
  function pendingOf(marks: readonly PendingMark[], pendingUntil: number | undefined, at: number): number {
    if (marks.length > 0 || pendingUntil === undefined) {
      legacySeen = undefined
      const seen = new Map<string, number>()
      let until = 0
      for (const mark of marks) {
        const first = firstSeen.get(mark.id) ?? at
        seen.set(mark.id, first)
        until = Math.max(until, first + Math.min(mark.forMs, maxPendingMs))
      }
      firstSeen = seen
      return until
    }
    firstSeen.clear()
    if (legacySeen?.value !== pendingUntil) legacySeen = { value: pendingUntil, at }
    return pendingUntil > at ? Math.min(pendingUntil, legacySeen.at + maxPendingMs) : 0
  }

  /** A background refresh failed: the cached secrets stay in use, and it is said once until a read succeeds. */
  function refreshFailed(error: unknown): void {
    if (failing) return
    failing = true
    // Every read's failure is a refusal made in load(); anything else is a fault of this file.
    const why = isWebhookVerificationError(error) ? `${error.message}${nameOf(error.cause)}` : 'An unexpected error.'
    say(`svc-webhooks: refreshing the secret source failed; the secrets read before stay in use until it answers. ${why}`)
  }

  async function rematch<T>(used: SourceSecretSet, mismatch: unknown, match: (fresh: SecretSet) => T | Promise<T>): Promise<T> {
    if (!isMismatch(mismatch)) throw mismatch
    let tried = used.keys
    let fresh = await recheck()
    let timer: ReturnType<typeof setTimeout> | undefined
    let over: Promise<undefined> | undefined
    try {
      // Bounded twice: by the hold's timer, and by a count (re-reads are spaced by secretRereadMs, at least 1 ms).
      for (let round = 0; round < 10_000; round++) {
        if (fresh.keys !== tried) {
          tried = fresh.keys
          try {
            return await match(fresh)
          } catch (error) {
            if (!isMismatch(error)) throw error
            mismatch = error
          }
        }
        if (!holding(fresh)) break
        over ??= new Promise<undefined>((done) => (timer = setTimeout(done, holdMs, undefined)))
        const later = await Promise.race([recheck(), over])
        if (later === undefined) break
        fresh = later
      }
    } finally {
      clearTimeout(timer)
    }
    if (!holding(fresh)) throw mismatch
    throw new WebhookVerificationError('secret_pending', 'No signature matched the secret source, and a secret change is pending there.')
  }

  return {
    current() {
      if (set === undefined) {
        if (reading !== undefined) return reading
        // A source that just failed is not read again for every request.
        if (lastError !== undefined && now() - lastStart < rereadMs) return Promise.reject(lastError)
        return read()
      }
      const at = now()
      // A refresh that failed is tried again after the re-read spacing, not on every request.
      if (at - readAt >= refreshMs && at - lastStart >= rereadMs && reading === undefined && next === undefined) read().then(noop, refreshFailed)
      return set
    },
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
  return a.length === b.length && a.every((s, i) => s === b[i])
}
