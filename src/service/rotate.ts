/**
 * Changing an endpoint's secret without a permanent refusal (DESIGN.md "Endpoint lifecycle
 * without loss"). The service stops the old secret the moment it answers `rotate-secret`, with
 * no overlap (spec/service-api.md §4.1), and the new secret exists only in that one answer. So the
 * secret source is marked pending first (every receiver holds a mismatch while it re-reads the
 * source, instead of answering 401, dropped), then the service is called, then the new secret is
 * added in front, and after a grace period the secrets the source held before are dropped.
 *
 * Several runs may do this at once (two operators, two cron hosts, "outcome unknown: run it
 * again" while the first still runs), so every write is conditional (the source's `version`,
 * checked and set by the engine) and made again from a fresh read when another write came first:
 * - each attempt sets its own mark (owner, fresh id) and only ever removes its own;
 * - an answered secret is added to what the source holds then, never written over it, so a
 *   rotation answered by the service after another one is never lost (the last answer at the
 *   service, not the last write, is the one that signs);
 * - the grace trim removes only the secrets that were there before this run's first mark (dead
 *   once its call was answered), and keeps every mark and every secret added since;
 * - once any attempt's outcome is unknown (no answer), the run never goes back: a later refusal
 *   leaves its mark pending, flagged `outcomeUnknown`, and the error says so. A later rotation
 *   whose own call is answered retires such marks.
 *
 * `registerEndpoint` does the same for a new endpoint: pending with no secret, create, store it.
 */
import { errorLabel, printable } from '../log-window.js'
import { marksOf, TIMED_OUT, within, type PendingMark, type SecretSource, type SecretState } from '../secrets/index.js'
import { resolveLog, type WebhookLog } from '../visibility.js'
import type { ServiceClient, WebhookEndpoint } from './types.js'
import { describeApiError as describe } from './watch.js'

/** A rotation's or a registration's failure: `code` says what state the secret source was left in. */
export class EndpointLifecycleError extends Error {
  override readonly name = 'EndpointLifecycleError'
  /** The service's HTTP status, when it answered one. */
  readonly status: number | undefined

  constructor(
    /**
     * - `refused`: the service refused the call (a 4xx) and no attempt of this run had an unknown
     *   outcome; the source holds its secrets, this run's mark removed.
     * - `outcome_unknown`: an attempt got no answer (lost, timed out, a 5xx), and no later attempt was
     *   answered with a secret (a later 4xx changes nothing): the service may hold a secret nobody
     *   has. The source stays pending (its mark flagged `outcomeUnknown`): run it again now.
     * - `source_failed`: the secret source could not be read or written; see the message for its state.
     */
    readonly code: 'refused' | 'outcome_unknown' | 'source_failed',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`svc-webhooks: ${message}`, options)
    const status = (options?.cause as { status?: unknown } | undefined)?.status
    this.status = typeof status === 'number' ? status : undefined
  }
}

/** Options of {@link rotateEndpointSecret}. */
export interface RotateEndpointSecretOptions {
  /** A client of the service's API: `createServiceClient(...)`. */
  service: Pick<ServiceClient, 'endpoints'>
  endpointId: string
  /** Where every receiver of the endpoint reads its secrets; needs `write`. */
  source: SecretSource
  /**
   * How long the old secret is still accepted after the new one is stored. The service stops
   * signing with it at once, but an attempt it signed just before may still be on the wire (it has
   * 10 s to be answered, spec §6.3), and the service's retry schedule is not published; the old
   * secret is dead at the service, so keeping it a few minutes costs nothing.
   * @default 300000 (5 min)
   */
  graceMs?: number
  /**
   * How long each receiver holds a mismatch (then answers 503 `secret_pending`) for this run's
   * mark, counted on its own clock from when it first sees the mark: a duration, never a time, so
   * a rotating host whose clock differs changes nothing. A new mark is written before each attempt.
   * The receivers honour at most their own bound (`maxPendingMs`, 60 s by default).
   * @default 60000
   */
  pendingMs?: number
  /**
   * `rotate-secret` calls made while the answer is unknown (a 5xx after the client's own retries,
   * a timeout, a lost connection) before giving up. Each new call makes a new secret; the last
   * answered one is the secret.
   * @default 3
   */
  attempts?: number
  /**
   * Longest wait for one `rotate-secret` answer. A slow service then costs a few seconds and a
   * new attempt, not a pending window so long that the receivers' held deliveries run out of the
   * sender's 10 s; kept below the receivers' `pendingHoldMs` (8 s).
   * @default 5000
   */
  attemptTimeoutMs?: number
  /**
   * Where the lines go: a function taking one line, or `false`. Never holds a secret.
   * @default console.warn
   */
  log?: WebhookLog
  /** @default Date.now */
  now?: () => number
}

/** What a rotation answers: the endpoint (never the secret, which only the source holds). */
export interface EndpointRotation {
  endpoint: WebhookEndpoint
  /** When the old secret is dropped, in milliseconds since the epoch. */
  trimAt: number
  /**
   * Settles once `[new]` is written (or the grace step was skipped because another change began).
   * The timer keeps the process up until then; a process that ends first leaves `[new, old]`, for
   * `finishEndpointRotation` or the next rotation. Never rejects: a failed trim is logged.
   */
  finished: Promise<void>
}

const DEFAULT_GRACE_MS = 5 * 60_000
const DEFAULT_PENDING_MS = 60_000
const DEFAULT_ATTEMPTS = 3
const DEFAULT_ATTEMPT_TIMEOUT_MS = 5000
/** Tries of a write to the secret source that failed (not a conflict): the new secret exists nowhere else. */
const WRITE_TRIES = 3
/** Read-change-write rounds lost to other writers before giving up: each lost round means another writer made progress. */
const CONFLICT_ROUNDS = 50

type Writable = SecretSource & { write: NonNullable<SecretSource['write']> }

/** A 4xx other than 408 and 429, known not to follow a call that may have acted: the service refused, and asking again gets the same answer. */
function refusedByService(error: unknown): boolean {
  const { status, code } = (error ?? {}) as { status?: unknown; code?: unknown }
  return typeof status === 'number' && status >= 400 && status < 500 && status !== 408 && status !== 429 && code !== 'outcome_unknown'
}

/** The endpoint as a caller may see it: without `signing_secret`. */
function withoutSecret(endpoint: WebhookEndpoint): WebhookEndpoint {
  const { signing_secret: _, ...rest } = endpoint
  return rest
}

function checkSource(name: string, source: SecretSource): asserts source is Writable {
  if (typeof source?.read !== 'function' || typeof source.write !== 'function') {
    throw new TypeError(`svc-webhooks: ${name} \`source\` must be a SecretSource with read() and write(), e.g. new RedisSecretSource({ client, key }).`)
  }
}

function checkCommon(name: string, service: unknown, source: SecretSource, numbers: Record<string, unknown>): asserts source is Writable {
  if (typeof (service as ServiceClient | undefined)?.endpoints !== 'object') {
    throw new TypeError(`svc-webhooks: ${name} \`service\` must be a service client: createServiceClient({ baseUrl, token, businessId }).`)
  }
  checkSource(name, source)
  for (const [key, value] of Object.entries(numbers)) {
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
      throw new TypeError(`svc-webhooks: ${name} \`${key}\` must be a number of milliseconds, 0 or more.`)
    }
  }
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms))

async function readState(source: SecretSource, empty?: SecretState): Promise<SecretState> {
  let state: SecretState
  try {
    state = await source.read()
  } catch (error) {
    // Only a read that found nothing stored is empty: an outage could hide a secret (an earlier
    // version's state has no version to guard a write), and writing over it would lose it.
    if (empty !== undefined && (error as { missing?: unknown } | null)?.missing === true) return empty
    throw new EndpointLifecycleError('source_failed', `the secret source could not be read (${errorLabel(error)}); nothing was changed.`, { cause: error })
  }
  if (!Array.isArray(state?.secrets) || state.secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new EndpointLifecycleError('source_failed', 'the secret source holds no valid state ({ secrets: string[] }); nothing was changed.')
  }
  return state
}

/** The state to write: what changes, the rest as read; `pendingUntil` (for receivers of earlier versions) only while a mark is left. */
function next(state: SecretState, secrets: readonly string[], marks: readonly PendingMark[], pendingUntil?: number): SecretState {
  const out: SecretState = { secrets: [...secrets] }
  if (marks.length > 0) {
    out.pending = marks
    const until = pendingUntil ?? state.pendingUntil
    if (until !== undefined) out.pendingUntil = until
  }
  return out
}

/**
 * One conditional change of the source: read it, compute the next state, write it only if the
 * source's version is still the one read, and start again from a fresh read when another writer
 * came first. `change` answers undefined when there is nothing to write. A write that throws is
 * tried again `tries` times; a source whose write answers nothing (not conditional) is taken at
 * its word, and `unconditional` is told.
 */
async function update(
  source: Writable,
  change: (state: SecretState) => SecretState | undefined,
  { tries = 1, empty, unconditional }: { tries?: number; empty?: SecretState; unconditional?: () => void } = {},
): Promise<SecretState | undefined> {
  let failures = 0
  for (let round = 0; round < CONFLICT_ROUNDS; round++) {
    const current = await readState(source, empty)
    const wanted = change(current)
    if (wanted === undefined) return undefined
    let written: boolean | void
    try {
      written = await source.write(wanted, { version: current.version ?? 0 })
    } catch (error) {
      if (++failures >= tries) throw error
      await sleep(100 * failures)
      continue
    }
    if (written !== false) {
      if (written === undefined) unconditional?.()
      return wanted
    }
    // Another writer came first: a short, random pause so two runs do not collide in step.
    await sleep(5 + Math.random() * 20)
  }
  throw new Error(`the secret source changed under every one of ${CONFLICT_ROUNDS} writes`)
}

/** Secrets, newest first, each once. */
function unique(secrets: readonly string[]): string[] {
  return [...new Set(secrets)]
}

interface Run {
  source: Writable
  owner: string
  pendingMs: number
  attempts: number
  attemptTimeoutMs: number
  now: () => number
  say: (line: string) => void
  /** The registration's record of the endpoints that existed before it, carried on its marks. */
  known?: readonly string[]
}

/** The outcome of the calls made while pending: the answer, and what the run learnt on the way. */
interface Called<T> {
  answer: T
  /** The secrets the source held when this run first marked it: dead once the answer came. */
  before: readonly string[]
  /** Ids of marks already flagged `outcomeUnknown` when this run first marked: the answer supersedes them. */
  superseded: ReadonlySet<string>
}

/**
 * Calls `call` up to `attempts` times while its outcome is unknown, setting this run's own mark
 * (a fresh id, so each receiver times it afresh) before each attempt. A refusal (4xx) with no
 * unknown outcome before it removes the mark and throws `refused`; once an outcome was unknown,
 * the mark stays, flagged, and the error is `outcome_unknown`, whatever a later attempt said.
 */
async function callWhilePending<T>(run: Run, what: string, call: (attempt: number) => Promise<T>): Promise<Called<T>> {
  const { source, owner, pendingMs, attempts, attemptTimeoutMs, now, say } = run
  let before: readonly string[] | undefined
  let superseded: ReadonlySet<string> = new Set()
  let unknown: unknown
  let warned = false
  const unconditional = () => {
    if (warned) return
    warned = true
    say('the secret source\'s write() does not say whether it wrote (no version check): two rotations at once are not protected from each other (docs/secret-sources.md).')
  }
  const setMark = async (flagUnknown: boolean): Promise<void> => {
    await update(
      source,
      (state) => {
        if (before === undefined) {
          before = [...state.secrets]
          superseded = new Set(marksOf(state).filter((m) => m.outcomeUnknown).map((m) => m.id))
        }
        const own = marksOf(state).find((m) => m.owner === owner)
        const mark: PendingMark = flagUnknown && own
          ? { ...own, outcomeUnknown: true }
          : { id: crypto.randomUUID(), owner, forMs: pendingMs, ...(run.known ? { known: run.known } : {}) }
        return next(state, state.secrets, [...marksOf(state).filter((m) => m.owner !== owner), mark], flagUnknown ? undefined : now() + pendingMs)
      },
      { tries: WRITE_TRIES, empty: run.known ? { secrets: [] } : undefined, unconditional },
    )
  }
  const stayPending = async (): Promise<void> => {
    await setMark(true).catch((error: unknown) => say(`flagging the pending mark failed (${errorLabel(error)}); it stays pending as it was.`))
  }
  for (let attempt = 1; ; attempt++) {
    try {
      await setMark(false)
    } catch (error) {
      if (unknown !== undefined) {
        throw new EndpointLifecycleError('outcome_unknown', `${what} got no answer, and the secret source could not be marked again (${errorLabel(error)}); it stays pending. Run it again now.`, { cause: error })
      }
      throw new EndpointLifecycleError('source_failed', `the secret source could not be marked pending (${errorLabel(error)}); the service was not called.`, { cause: error })
    }
    try {
      // The client's own timeout is asked for; this bound holds for a client that ignores it.
      const answer = await within(call(attempt), attemptTimeoutMs + 1000)
      if (answer === TIMED_OUT) throw Object.assign(new Error(`no answer within ${attemptTimeoutMs} ms`), { name: 'TimeoutError' })
      return { answer, before: before!, superseded }
    } catch (error) {
      // A refusal, or this run's own verdict (an ambiguous registration): nothing more to try.
      if (refusedByService(error) || error instanceof EndpointLifecycleError) {
        if (unknown === undefined) {
          await update(source, (state) => {
            const marks = marksOf(state)
            if (!marks.some((m) => m.owner === owner)) return undefined
            return next(state, state.secrets, marks.filter((m) => m.owner !== owner))
          }).catch((failure: unknown) => say(`removing this run's pending mark failed (${errorLabel(failure)}); receivers hold mismatches until it times out.`))
          if (error instanceof EndpointLifecycleError) throw error
          throw new EndpointLifecycleError('refused', `the service refused ${what} (${describe(error)}); the secret source holds what it held before.`, { cause: error })
        }
        await stayPending()
        throw new EndpointLifecycleError(
          'outcome_unknown',
          `${what}: an earlier attempt got no answer (${describe(unknown)}), then the service refused (${describe(error)}). The earlier one may have made a ` +
            'secret nobody holds, so the source stays pending (it is not put back to a secret the service may have stopped). Fix the cause and run it again now.',
          { cause: error },
        )
      }
      unknown = error
      if (attempt >= attempts) {
        await stayPending()
        throw new EndpointLifecycleError(
          'outcome_unknown',
          `${what} got no answer after ${attempts} attempt(s) (${describe(error)}); the service may have made a new secret that nobody holds. ` +
            'Run it again now: the source stays pending, and the receivers hold and retry meanwhile.',
          { cause: error },
        )
      }
      say(`${what}: no answer (${describe(error)}); asking again (attempt ${attempt + 1} of ${attempts}).`)
    }
  }
}

/**
 * Adds the answered secret in front of what the source holds now, removes this run's mark and the
 * `outcomeUnknown` marks it supersedes, conditionally, and tries a failed write a few times: the
 * secret exists nowhere else.
 */
async function storeAnswer(run: Run, secret: string, superseded: ReadonlySet<string>, what: string, before: readonly string[] = []): Promise<void> {
  let overlapped = false
  try {
    await update(
      run.source,
      (state) => {
        // A secret neither there at this run's start nor its own: another run was answered meanwhile.
        overlapped = state.secrets.some((s) => s !== secret && !before.includes(s))
        return next(state, unique([secret, ...state.secrets]), marksOf(state).filter((m) => m.owner !== run.owner && !superseded.has(m.id)))
      },
      { tries: WRITE_TRIES },
    )
  } catch (error) {
    // The answered secret is lost with this write: as for a lost answer, the mark stays, flagged, if the source takes that much.
    await update(run.source, (state) => {
      const own = marksOf(state).find((m) => m.owner === run.owner)
      if (own === undefined || own.outcomeUnknown) return undefined
      return next(state, state.secrets, marksOf(state).map((m) => (m === own ? { ...m, outcomeUnknown: true } : m)))
    }).catch(() => undefined)
    throw new EndpointLifecycleError(
      'source_failed',
      `${what}, but the secret source refused to store the new secret (${errorLabel(error)}), and the service shows it only once. ` +
        'The source stays pending: fix it and rotate again.',
      { cause: error },
    )
  }
  if (overlapped) {
    run.say(
      'another run was answered while this one ran: both new secrets are kept (the service signs with whichever it answered last) ' +
        'until the next rotation\'s grace step; finishEndpointRotation would keep only the newest stored, so do not run it meanwhile.',
    )
  }
}

/**
 * Rotates an endpoint's signing secret with no delivery refused for good: marks the source
 * pending, calls `rotate-secret`, adds the new secret in front, and after `graceMs` drops the
 * secrets the source held before. Safe to run beside another rotation of the same endpoint.
 * Throws an {@link EndpointLifecycleError}; its `code` says what state the source was left in.
 *
 * @example
 * const service = createServiceClient({ baseUrl, token: process.env.SVC_API_TOKEN!, businessId })
 * const source = new RedisSecretSource({ client: redis, key: 'svc:webhook-secret' })
 * const { endpoint, finished } = await rotateEndpointSecret({ service, endpointId, source })
 * await finished // the old secret is dropped after graceMs (5 min)
 */
export async function rotateEndpointSecret(options: RotateEndpointSecretOptions): Promise<EndpointRotation> {
  const {
    service,
    endpointId,
    source,
    graceMs = DEFAULT_GRACE_MS,
    pendingMs = DEFAULT_PENDING_MS,
    attempts = DEFAULT_ATTEMPTS,
    attemptTimeoutMs = DEFAULT_ATTEMPT_TIMEOUT_MS,
    now = Date.now,
  } = options
  checkCommon('rotateEndpointSecret', service, source, { graceMs, pendingMs, attemptTimeoutMs })
  if (typeof endpointId !== 'string' || endpointId.length === 0) throw new TypeError('svc-webhooks: rotateEndpointSecret `endpointId` must be the endpoint\'s id.')
  if (!Number.isInteger(attempts) || attempts < 1) throw new TypeError('svc-webhooks: rotateEndpointSecret `attempts` must be a whole number, 1 or more.')
  const log = resolveLog(options.log)
  const say = (text: string): void => log?.(`svc-webhooks: rotating endpoint ${printable(endpointId)}: ${text}`)
  const run: Run = { source, owner: crypto.randomUUID(), pendingMs, attempts, attemptTimeoutMs, now, say }

  const current = await readState(source)
  if (marksOf(current).length > 0 || (current.pendingUntil !== undefined && current.pendingUntil > now())) {
    say('a change is already pending (another run, or one that stopped); this one runs beside it: every answered secret is kept.')
  }
  const { answer: rotated, before, superseded } = await callWhilePending(run, 'rotate-secret', () =>
    service.endpoints.rotateSecret(endpointId, { timeoutMs: attemptTimeoutMs }),
  )
  const secret = rotated.signing_secret
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new EndpointLifecycleError('outcome_unknown', 'rotate-secret answered without a signing_secret; run it again now (the source stays pending).')
  }
  await storeAnswer(run, secret, superseded, 'the service rotated the secret', before)
  const trimAt = now() + graceMs
  say(`new secret stored beside the old one; the old one is dropped in ${Math.round(graceMs / 1000)} s.`)
  const finished = sleep(graceMs).then(async () => {
    try {
      await trim(source, before)
    } catch (error) {
      say(`dropping the old secret failed (${errorLabel(error)}); it stays accepted until finishEndpointRotation or the next rotation.`)
    }
  })
  return { endpoint: withoutSecret(rotated), trimAt, finished }
}

/**
 * Drops `dead` from what the source holds now, conditionally: every mark and every secret added
 * since stays. Resolves whether it dropped anything.
 */
async function trim(source: Writable, dead: readonly string[]): Promise<boolean> {
  const gone = new Set(dead)
  const written = await update(source, (state) => {
    const kept = state.secrets.filter((s) => !gone.has(s))
    if (kept.length === state.secrets.length || kept.length === 0) return undefined
    return next(state, kept, marksOf(state))
  })
  return written !== undefined
}

/**
 * The grace step of a rotation on its own, for a run that ended before it (a crash, a script that
 * did not wait for `finished`): keeps only the newest secret, unless a change is pending. Written
 * conditionally: a rotation that marks the source meanwhile is never overwritten. Resolves whether
 * it dropped anything.
 *
 * @example
 * await finishEndpointRotation({ source }) // true: [new, old] became [new]
 */
export async function finishEndpointRotation(options: { source: SecretSource; now?: () => number }): Promise<boolean> {
  checkSource('finishEndpointRotation', options?.source)
  const now = options.now ?? Date.now
  const written = await update(options.source, (state) => {
    const pending = marksOf(state).length > 0 || (state.pendingUntil !== undefined && state.pendingUntil > now())
    if (pending || state.secrets.length < 2) return undefined
    return { secrets: [state.secrets[0]!] }
  })
  return written !== undefined
}
/** Options of {@link registerEndpoint}. */
export interface RegisterEndpointOptions {
  service: Pick<ServiceClient, 'endpoints'>
  /** `https://` on port 443, publicly resolvable (spec §2.1). */
  url: string
  /** @default '' */
  label?: string
  /**
   * Event types to receive; empty means every event, including ones added later.
   * @default []
   */
  subscribedEvents?: string[]
  /** Where every receiver of the endpoint reads its secrets; needs `write`. */
  source: SecretSource
  /** @default 60000 (see {@link RotateEndpointSecretOptions.pendingMs}) */
  pendingMs?: number
  /** @default 3 (see {@link RotateEndpointSecretOptions.attempts}) */
  attempts?: number
  /** @default console.warn */
  log?: WebhookLog
  /** @default Date.now */
  now?: () => number
}

/**
 * Creates an endpoint whose first deliveries are never refused for good: the source is marked
 * pending with no secret (a delivery that arrives before the secret is stored is held, then
 * verified), the endpoint is created, and its secret stored. The ids of the endpoints that already
 * have this URL are listed first and kept on the mark: a run that resumes (an earlier attempt's
 * answer was lost, or an earlier run stopped after creating) rotates the one endpoint of this URL
 * that is not among them, never one someone else made with the same URL. Resolves the endpoint
 * without its secret; throws an {@link EndpointLifecycleError}, or the client's own error when
 * that first list fails (nothing was changed then).
 *
 * @example
 * const endpoint = await registerEndpoint({ service, url: 'https://example.com/webhooks/svc', source })
 * console.log(endpoint.id) // the secret is in the source only
 */
export async function registerEndpoint(options: RegisterEndpointOptions): Promise<WebhookEndpoint> {
  const { service, url, label = '', subscribedEvents = [], source, pendingMs = DEFAULT_PENDING_MS, attempts = DEFAULT_ATTEMPTS, now = Date.now } = options
  checkCommon('registerEndpoint', service, source, { pendingMs })
  if (typeof url !== 'string' || url.length === 0) throw new TypeError('svc-webhooks: registerEndpoint `url` must be the endpoint\'s https:// URL.')
  if (!Number.isInteger(attempts) || attempts < 1) throw new TypeError('svc-webhooks: registerEndpoint `attempts` must be a whole number, 1 or more.')
  const log = resolveLog(options.log)
  const say = (text: string): void => log?.(`svc-webhooks: registering ${printable(url, 200)}: ${text}`)

  // A source that holds nothing yet may throw (with `missing: true`) rather than answer empty.
  const held = await readState(source, { secrets: [] })
  if (held.secrets.length > 0) {
    throw new EndpointLifecycleError('source_failed', 'the secret source already holds a secret: use rotateEndpointSecret to change an endpoint\'s secret, or give the new endpoint a source of its own.')
  }
  const sameUrl = async (): Promise<string[]> => (await service.endpoints.list()).filter((e) => e.url === url).map((e) => e.id)
  // Pending with no secret: an earlier run stopped after marking it, and may have created the endpoint.
  const earlier = marksOf(held)
  const resumed = earlier.length > 0 || held.pendingUntil !== undefined
  let known: readonly string[]
  if (resumed) {
    const records = earlier.filter((m) => Array.isArray(m.known))
    if (records.length === 0) {
      const ids = await sameUrl()
      if (ids.length > 0) {
        throw new EndpointLifecycleError(
          'source_failed',
          `the secret source is pending from an earlier registration that kept no record of which endpoints were there before it, and ${ids.length} endpoint(s) have this URL (${ids.map((id) => printable(id)).join(', ')}). ` +
            'Rotate the one that is yours with rotateEndpointSecret (or delete it), or clear the source; no endpoint was changed.',
        )
      }
      known = []
    } else known = [...new Set(records.flatMap((m) => m.known!))]
  } else known = await sameUrl()
  const run: Run = { source, owner: crypto.randomUUID(), pendingMs, attempts, attemptTimeoutMs: DEFAULT_ATTEMPT_TIMEOUT_MS * 2, now, say, known }
  let rotatedEarlier = false
  const { answer: created, superseded } = await callWhilePending(run, 'creating the endpoint', async (attempt) => {
    // After an attempt with no answer, or a run that stopped after creating: an endpoint of this
    // URL that was not there before may be ours, and only a rotation can tell its secret.
    if (resumed || attempt > 1) {
      const ours = (await sameUrl()).filter((id) => !known.includes(id))
      if (ours.length > 1) {
        throw new EndpointLifecycleError(
          'source_failed',
          `${ours.length} endpoints with this URL were made since the registration began (${ours.map((id) => printable(id)).join(', ')}): delete all but one, then rotate it.`,
        )
      }
      if (ours.length === 1) {
        say(`${attempt > 1 ? 'the earlier attempt created it' : 'an earlier run created it, with no secret stored'}; rotating its secret to learn one.`)
        rotatedEarlier = resumed
        return service.endpoints.rotateSecret(ours[0]!, { timeoutMs: run.attemptTimeoutMs })
      }
    }
    return service.endpoints.create({ label, url, subscribed_events: subscribedEvents })
  })
  if (typeof created.signing_secret !== 'string' || created.signing_secret.length === 0) {
    throw new EndpointLifecycleError('outcome_unknown', 'the service answered without a signing_secret; run registerEndpoint again (the source stays pending).')
  }
  // The endpoint an earlier run created was rotated after it: that run's marks are settled by this answer.
  const settled = rotatedEarlier ? new Set([...superseded, ...earlier.map((m) => m.id)]) : superseded
  await storeAnswer(run, created.signing_secret, settled, `the service created endpoint ${created.id}`)
  return withoutSecret(created)
}
