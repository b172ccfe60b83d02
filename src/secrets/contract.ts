/**
 * The secret source contract (DESIGN.md "Endpoint lifecycle without loss", "Two things at once"):
 * a place every process of a receiver reads its endpoint's secrets from, so a rotation reaches all
 * of them without a restart, and that several rotating processes write only conditionally.
 * Implementations: `RedisSecretSource` (svc-webhooks/redis), `PostgresSecretSource`
 * (svc-webhooks/postgres), `FileSecretSource` (svc-webhooks/service), or your own.
 */

/**
 * A pending mark: one rotation or registration in flight. `id` is new for every attempt, so a
 * receiver that saw an earlier mark starts a fresh window for it; `owner` is the run that set it
 * and the only one that clears it (except an `outcomeUnknown` mark, which a later rotation whose
 * own call was answered retires: whatever the unknown call did, that later one replaced it).
 */
export interface PendingMark {
  /** New for every attempt. */
  id: string
  /** The run that set it. */
  owner: string
  /**
   * How long the receivers hold a mismatch for this mark, in milliseconds, counted on each
   * receiver's own clock from when it first saw this `id` (never another host's absolute time).
   */
  forMs: number
  /** The run's call lost its answer: the service may hold a secret nobody has. */
  outcomeUnknown?: boolean
  /**
   * A registration's record: the ids of the endpoints with its URL that existed before it, so a
   * run that resumes it never takes another's endpoint of the same URL for its own.
   */
  known?: readonly string[]
}

/**
 * What a secret source holds: the endpoint's secrets (newest first) and, while a change is in
 * flight (a rotation or a new endpoint whose secret is not stored yet), its pending marks. While a
 * mark is pending, a delivery whose signature matches none of `secrets` is held while the source
 * is re-read (and verified once the new secret is there) instead of answered 401.
 */
export interface SecretState {
  /** Newest first. May be empty only while a change is pending (an endpoint being registered). */
  secrets: readonly string[]
  /** The changes in flight, each with its owner. */
  pending?: readonly PendingMark[]
  /**
   * The older form of a pending change: milliseconds since the epoch, by the writer's clock. Read
   * when `pending` is absent (a state written by an earlier version or by hand), honoured for at
   * most the receiver's own bound (60 s by default) from the read that first saw that value.
   */
  pendingUntil?: number
  /**
   * Set by the source on `read()`: bumped by every write, checked by a conditional write. A
   * value given to `write()` is ignored (the source sets it).
   */
  version?: number
}

/** The condition of a conditional write: the `version` the writer read. */
export interface SecretWriteCondition {
  /** The `version` `read()` answered (0 or absent when the source held nothing, or held no version). */
  version: number
}

/**
 * A shared place to read an endpoint's secrets from, and to write them during a rotation.
 *
 * `write(state, { version })` is the conditional write every rotation and registration uses: it
 * stores `state` (with the version bumped) only if the stored `version` is still the one given,
 * checked and set atomically by the engine, and resolves `true`, or changes nothing and resolves
 * `false`. A source that answers nothing (`undefined`) is taken as having written unconditionally,
 * as sources written for earlier versions do: rotations still work, but two at once are not
 * protected from each other (docs/secret-sources.md).
 *
 * @example
 * const source: SecretSource = {
 *   read: async () => ({ secrets: [await vault.get('svc-webhook-secret')] }),
 * }
 * app.post('/webhooks/svc', webhooks({ secret: source, on }))
 */
export interface SecretSource {
  /**
   * The current state, with its `version`. A throw or rejection is answered 503 (the sender
   * retries). Holding nothing yet: answer `{ secrets: [] }`, or throw an error with
   * `missing: true`; `registerEndpoint` takes any other failed read as an outage and stops.
   */
  read(): Promise<SecretState> | SecretState
  /** Replaces the state (only if unchanged since `condition.version`, when given); needed by `rotateEndpointSecret` and `registerEndpoint`. */
  write?(state: SecretState, condition?: SecretWriteCondition): Promise<boolean | void> | boolean | void
}

/** True for an object that implements {@link SecretSource} (has a `read` function). */
export function isSecretSource(value: unknown): value is SecretSource {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as SecretSource).read === 'function'
}

/** Why a value read from a source cannot be used, never quoting it; undefined when it can. */
export function stateProblem(state: unknown): string | undefined {
  if (typeof state !== 'object' || state === null || Array.isArray(state)) return 'it is not an object { secrets: string[] }'
  const { secrets, pendingUntil, pending, version } = state as { secrets?: unknown; pendingUntil?: unknown; pending?: unknown; version?: unknown }
  if (!Array.isArray(secrets)) return '`secrets` is not a list of strings'
  const bad = listProblem(secrets)
  if (bad) return bad === 'empty' ? '`secrets` holds an empty or non-string value' : 'a secret in `secrets` has leading or trailing whitespace'
  // Number.isFinite is false for anything but a number.
  if (pendingUntil != null && !Number.isFinite(pendingUntil)) return '`pendingUntil` is not a number of milliseconds since the epoch'
  if (pending != null) {
    if (!Array.isArray(pending)) return '`pending` is not a list of marks'
    for (const mark of pending as unknown[]) {
      const { id, owner, forMs } = (mark ?? {}) as { id?: unknown; owner?: unknown; forMs?: unknown }
      if (!id || typeof id !== 'string' || !owner || typeof owner !== 'string' || !((forMs as number) >= 0 && Number.isFinite(forMs))) {
        return 'a mark in `pending` is not { id, owner, forMs }'
      }
    }
  }
  if (version != null && !(Number.isSafeInteger(version) && (version as number) >= 0)) return '`version` is not a whole number'
  return undefined
}

/**
 * What is wrong with a list of secrets, without quoting them: `'empty'` (a value that is not a
 * non-empty string), `'space'` (leading or trailing whitespace), or undefined.
 */
export function listProblem(list: readonly unknown[]): 'empty' | 'space' | undefined {
  for (const s of list) {
    if (typeof s !== 'string' || s === '') return 'empty'
    if (s.trim() !== s) return 'space'
  }
  return undefined
}

/** The marks of a state, in their newer form: `pending`, or none. */
export function marksOf(state: Pick<SecretState, 'pending'>): readonly PendingMark[] {
  return state.pending ?? []
}
