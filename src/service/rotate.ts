/**
 * Changing an endpoint's secret without a permanent refusal (DESIGN.md "Endpoint lifecycle
 * without loss"). The service stops the old secret the moment it answers `rotate-secret`, with
 * no overlap (spec/service-api.md §4.1), and the new secret exists only in that one answer. So the
 * secret source is marked pending first (every receiver answers a mismatch 503 `secret_pending`,
 * retried by the sender, instead of 401, dropped), then the service is called, then `[new, old]`
 * is stored, and after a grace period `[new]`. A lost or failed answer is handled by rotating
 * again, never by guessing; every step leaves a state the next run repairs:
 *
 * - pending, with the old list (a crash or a lost answer around the call): the receivers answer
 *   503 until `pendingUntil`, and a new `rotateEndpointSecret` simply rotates again;
 * - `[new, old]` with nothing pending (the grace step never ran): harmless, the old secret is dead
 *   at the service; `finishEndpointRotation` (or the next rotation, which keeps one old secret
 *   only) drops it.
 *
 * `registerEndpoint` does the same for a new endpoint: pending with no secret, create, store it.
 */
import { errorLabel, printable } from '../log-window.js'
import type { SecretSource, SecretState } from '../secret-source.js'
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
     * - `refused`: the service refused the call (a 4xx); the source holds its old secrets, nothing pending.
     * - `outcome_unknown`: no answer after every attempt; the service may have changed the secret.
     *   The source stays pending until `pendingUntil` (deliveries are answered 503 and retried): run it again now.
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
   * How long the receivers answer a mismatch 503 `secret_pending` while the call is made; written
   * again before each attempt. The receivers honour at most their own bound (60 s by default).
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
/** Tries of a write to the secret source once the service answered: the secret exists nowhere else. */
const WRITE_TRIES = 3

/** A 4xx other than 408 and 429: the service refused, and asking again gets the same answer. */
function refusedByService(error: unknown): boolean {
  const status = (error as { status?: unknown } | null)?.status
  return typeof status === 'number' && status >= 400 && status < 500 && status !== 408 && status !== 429
}

/** The endpoint as a caller may see it: without `signing_secret`. */
function withoutSecret(endpoint: WebhookEndpoint): WebhookEndpoint {
  const { signing_secret: _, ...rest } = endpoint
  return rest
}

function checkSource(name: string, source: SecretSource): void {
  if (typeof source?.read !== 'function' || typeof source.write !== 'function') {
    throw new TypeError(`svc-webhooks: ${name} \`source\` must be a SecretSource with read() and write(), e.g. new RedisSecretSource({ client, key }).`)
  }
}

function checkCommon(name: string, service: unknown, source: SecretSource, numbers: Record<string, unknown>): void {
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

async function readState(source: SecretSource): Promise<SecretState> {
  let state: SecretState
  try {
    state = await source.read()
  } catch (error) {
    throw new EndpointLifecycleError('source_failed', `the secret source could not be read (${errorLabel(error)}); nothing was changed.`, { cause: error })
  }
  if (!Array.isArray(state?.secrets) || state.secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new EndpointLifecycleError('source_failed', 'the secret source holds no valid state ({ secrets: string[] }); nothing was changed.')
  }
  return state
}

/** Writes the state that holds the only copy of a new secret, trying again a few times. */
async function writeNew(source: SecretSource, state: SecretState, what: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await source.write!(state)
      return
    } catch (error) {
      if (attempt >= WRITE_TRIES) {
        throw new EndpointLifecycleError(
          'source_failed',
          `${what}, but the secret source refused to store the new secret (${errorLabel(error)}) ${WRITE_TRIES} times, and the service shows it only once. ` +
            'The source is still pending until its pendingUntil: fix it and rotate again.',
          { cause: error },
        )
      }
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt))
    }
  }
}

/**
 * Calls `call` up to `attempts` times while its outcome is unknown, writing `pending` (with a
 * fresh `pendingUntil`) before each attempt. A refusal (4xx) writes `restore` and throws.
 */
async function callWhilePending<T>(
  source: SecretSource,
  secrets: readonly string[],
  restore: SecretState,
  { pendingMs, attempts, now, say }: { pendingMs: number; attempts: number; now: () => number; say: (line: string) => void },
  what: string,
  call: (attempt: number) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      await source.write!({ secrets, pendingUntil: now() + pendingMs })
    } catch (error) {
      throw new EndpointLifecycleError('source_failed', `the secret source could not be marked pending (${errorLabel(error)}); the service was not called.`, { cause: error })
    }
    try {
      return await call(attempt)
    } catch (error) {
      if (refusedByService(error)) {
        await Promise.resolve(source.write!(restore)).catch(() => undefined)
        throw new EndpointLifecycleError('refused', `the service refused ${what} (${describe(error)}); the secret source holds what it held before.`, { cause: error })
      }
      if (attempt >= attempts) {
        throw new EndpointLifecycleError(
          'outcome_unknown',
          `${what} got no answer after ${attempts} attempt(s) (${describe(error)}); the service may have made a new secret that nobody holds. ` +
            'Run it again now: until pendingUntil the receivers answer 503 and the sender retries.',
          { cause: error },
        )
      }
      say(`${what}: no answer (${describe(error)}); asking again (attempt ${attempt + 1} of ${attempts}).`)
    }
  }
}

/**
 * Rotates an endpoint's signing secret with no delivery refused for good: marks the source
 * pending, calls `rotate-secret`, stores `[new, old]`, and after `graceMs` `[new]`.
 * Throws an {@link EndpointLifecycleError}; its `code` says what state the source was left in.
 *
 * @example
 * const service = createServiceClient({ baseUrl, token: process.env.SVC_API_TOKEN!, businessId })
 * const source = new RedisSecretSource({ client: redis, key: 'svc:webhook-secret' })
 * const { endpoint, finished } = await rotateEndpointSecret({ service, endpointId, source })
 * await finished // the old secret is dropped after graceMs (5 min)
 */
export async function rotateEndpointSecret(options: RotateEndpointSecretOptions): Promise<EndpointRotation> {
  const { service, endpointId, source, graceMs = DEFAULT_GRACE_MS, pendingMs = DEFAULT_PENDING_MS, attempts = DEFAULT_ATTEMPTS, now = Date.now } = options
  checkCommon('rotateEndpointSecret', service, source, { graceMs, pendingMs })
  if (typeof endpointId !== 'string' || endpointId.length === 0) throw new TypeError('svc-webhooks: rotateEndpointSecret `endpointId` must be the endpoint\'s id.')
  if (!Number.isInteger(attempts) || attempts < 1) throw new TypeError('svc-webhooks: rotateEndpointSecret `attempts` must be a whole number, 1 or more.')
  const log = resolveLog(options.log)
  const say = (text: string): void => log?.(`svc-webhooks: rotating endpoint ${printable(endpointId)}: ${text}`)

  const current = await readState(source)
  if (current.pendingUntil !== undefined && current.pendingUntil > now()) {
    say('a change was already pending (an earlier run stopped, or another is running); rotating again: the last answer wins.')
  }
  // Only the newest old secret can still sign an attempt on the wire: any older one died at an
  // earlier rotation (a grace step that never ran left it here).
  const old = current.secrets.slice(0, 1)
  const rotated = await callWhilePending(source, current.secrets, { secrets: current.secrets }, { pendingMs, attempts, now, say }, 'rotate-secret', () =>
    service.endpoints.rotateSecret(endpointId),
  )
  const secret = rotated.signing_secret
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new EndpointLifecycleError('outcome_unknown', 'rotate-secret answered without a signing_secret; run it again now (the source stays pending until pendingUntil).')
  }
  await writeNew(source, { secrets: [secret, ...old] }, 'the service rotated the secret')
  const trimAt = now() + graceMs
  say(`new secret stored beside the old one; the old one is dropped in ${Math.round(graceMs / 1000)} s.`)
  const finished = new Promise<void>((resolve) => setTimeout(resolve, graceMs)).then(async () => {
    try {
      await finishRotation(source, secret)
    } catch (error) {
      say(`dropping the old secret failed (${errorLabel(error)}); it stays accepted until finishEndpointRotation or the next rotation.`)
    }
  })
  return { endpoint: withoutSecret(rotated), trimAt, finished }
}

/** Writes `[secrets[0]]` when the source holds more and no change is pending; `expected` guards against a newer rotation. */
async function finishRotation(source: SecretSource, expected?: string, now: () => number = Date.now): Promise<boolean> {
  const state = await source.read()
  const pending = state.pendingUntil !== undefined && state.pendingUntil > now()
  if (pending || state.secrets.length < 2 || (expected !== undefined && state.secrets[0] !== expected)) return false
  await source.write!({ secrets: [state.secrets[0]!] })
  return true
}

/**
 * The grace step of a rotation on its own, for a run that ended before it (a crash, a script that
 * did not wait for `finished`): keeps only the newest secret, unless a change is pending. Resolves
 * whether it dropped anything.
 *
 * @example
 * await finishEndpointRotation({ source }) // true: [new, old] became [new]
 */
export async function finishEndpointRotation(options: { source: SecretSource; now?: () => number }): Promise<boolean> {
  checkSource('finishEndpointRotation', options?.source)
  return finishRotation(options.source, undefined, options.now)
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
 * pending with no secret (a delivery that arrives before the secret is stored is answered 503
 * `secret_pending`, so the sender retries), the endpoint is created, and its secret stored. When
 * an endpoint with the same URL already exists and the source holds no secret (an earlier run
 * stopped after creating it), its secret is rotated instead of creating a second one. Resolves
 * the endpoint without its secret; throws an {@link EndpointLifecycleError}.
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

  let held: Partial<SecretState> = {}
  try {
    held = (await source.read()) ?? {}
  } catch {
    // A source that holds nothing yet may throw rather than answer empty.
  }
  if (held.secrets?.length) {
    throw new EndpointLifecycleError('source_failed', 'the secret source already holds a secret: use rotateEndpointSecret to change an endpoint\'s secret, or give the new endpoint a source of its own.')
  }
  // Pending with no secret: an earlier run stopped after marking it, and may have created the endpoint.
  const resumed = held.pendingUntil !== undefined
  const created = await callWhilePending(source, [], { secrets: [] }, { pendingMs, attempts, now, say }, 'creating the endpoint', async (attempt) => {
    // After an attempt with no answer, or a run that stopped after creating: an endpoint for this
    // URL may exist, and only a rotation can tell its secret. Otherwise no list call: an endpoint
    // of the same URL made by someone else is never rotated.
    const existing = resumed || attempt > 1 ? (await service.endpoints.list()).find((e) => e.url === url) : undefined
    if (existing) {
      say(`${attempt > 1 ? 'the earlier attempt created it' : 'it exists, with no secret stored'}; rotating its secret to learn one.`)
      return service.endpoints.rotateSecret(existing.id)
    }
    return service.endpoints.create({ label, url, subscribed_events: subscribedEvents })
  })
  if (typeof created.signing_secret !== 'string' || created.signing_secret.length === 0) {
    throw new EndpointLifecycleError('outcome_unknown', 'the service answered without a signing_secret; run registerEndpoint again (the source stays pending until pendingUntil).')
  }
  await writeNew(source, { secrets: [created.signing_secret] }, `the service created endpoint ${created.id}`)
  return withoutSecret(created)
}
