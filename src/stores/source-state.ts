/**
 * What the secret sources of svc-webhooks share (RedisSecretSource, PostgresSecretSource,
 * FileSecretSource): the state as stored text, checked before a write, and their errors, whose
 * messages the receiver may log because they never quote a stored value. Not a public entry.
 */
import { stateProblem } from '../secret-cache.js'
import type { SecretState } from '../secret-source.js'

/** The `name` of a source's own errors: the receiver's log line keeps their message (secret-cache.ts). */
export const SOURCE_ERROR = 'SecretSourceError'

/**
 * An error of a source whose message says what is wrong without quoting a stored value.
 *
 * @example
 * throw sourceError('RedisSecretSource: the key "svc:secret" does not exist; write the endpoint\'s secret to it.')
 */
export function sourceError(message: string, cause?: unknown): Error {
  const error = new Error(`svc-webhooks: ${message}`, cause === undefined ? undefined : { cause })
  error.name = SOURCE_ERROR
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
 * what every receiver would then refuse.
 *
 * @example
 * const text = stateText(state, 'RedisSecretSource')
 */
export function stateText(state: SecretState, what: string): string {
  const problem = stateProblem(state)
  if (problem !== undefined) throw new TypeError(`svc-webhooks: ${what}.write was given an unusable state: ${problem}.`)
  const { secrets, pendingUntil } = state
  if (secrets.length === 0 && pendingUntil == null) {
    throw new TypeError(`svc-webhooks: ${what}.write was given no secret and no pendingUntil: every delivery would be refused.`)
  }
  return JSON.stringify(pendingUntil == null ? { secrets } : { secrets, pendingUntil })
}
