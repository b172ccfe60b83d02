/**
 * What the secret sources of svc-webhooks share (RedisSecretSource, PostgresSecretSource,
 * FileSecretSource): the state as stored text, checked before a write, and their errors, whose
 * messages the receiver may log because they never quote a stored value. Not a public entry.
 */
import { stateProblem, type SecretState } from '../secrets/index.js'

/** The `name` of a source's own errors: the receiver's log line keeps their message (src/secrets/cache.ts). */
export const SOURCE_ERROR = 'SecretSourceError'

/**
 * An error of a source whose message says what is wrong without quoting a stored value.
 * `missing`: the read found nothing stored (no key, row or file), which `registerEndpoint` takes
 * as an empty source; any other failed read stops it with nothing changed.
 *
 * @example
 * throw sourceError('RedisSecretSource: the key "svc:secret" does not exist; write the endpoint\'s secret to it.', undefined, true)
 */
export function sourceError(message: string, cause?: unknown, missing = false): Error {
  const error = new Error(`svc-webhooks: ${message}`, cause === undefined ? undefined : { cause })
  error.name = SOURCE_ERROR
  if (missing) (error as Error & { missing?: true }).missing = true
  return error
}

/**
 * The state in stored text: its JSON, or the text as is when it is not JSON, for the receiver to
 * refuse as an unusable value (the parser's own message would quote it).
 *
 * @example
 * parseState('{"secrets":["svc_whsec_..."]}') // { secrets: ['svc_whsec_...'] }
 */
export function parseState(text: string): SecretState {
  try {
    return JSON.parse(text) as SecretState
  } catch {
    return text as unknown as SecretState
  }
}

/**
 * The state as stored text, after checking it is one a receiver can use: a write never stores
 * what every receiver would then refuse. `version` is left out: each source keeps its own.
 *
 * @example
 * const text = stateText(state, 'RedisSecretSource')
 */
export function stateText(state: SecretState, what: string): string {
  const problem = stateProblem(state)
  if (problem !== undefined) throw new TypeError(`svc-webhooks: ${what}.write was given an unusable state: ${problem}.`)
  const { secrets, pendingUntil, pending } = state
  const marks = pending ?? []
  if (secrets.length === 0 && pendingUntil == null && marks.length === 0) {
    throw new TypeError(`svc-webhooks: ${what}.write was given no secret and no pending mark: every delivery would be refused.`)
  }
  return JSON.stringify({ secrets, ...(marks.length > 0 ? { pending: marks } : {}), ...(pendingUntil == null ? {} : { pendingUntil }) })
}

/**
 * The condition of a write, checked before it is sent: a whole number, or none.
 *
 * @example
 * const expected = expectedVersion(condition, 'RedisSecretSource')
 */
export function expectedVersion(condition: { version?: unknown } | undefined, what: string): number | undefined {
  if (condition === undefined) return undefined
  const { version } = condition
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0) {
    throw new TypeError(`svc-webhooks: ${what}.write condition \`version\` must be the whole number read() answered (0 when it held none).`)
  }
  return version
}
