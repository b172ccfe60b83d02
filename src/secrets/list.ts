/**
 * A list of secrets as the HMAC uses it: the value checked (never quoted), each key imported once,
 * and the keys of a secret function's answers kept per list, so a tenant's deliveries do not pay
 * for the import every time.
 */
import { importSecret, type SecretKey } from '#crypto'
import { listProblem } from './contract.js'

/** One secret, or several during a rotation. */
export type Secrets = string | readonly string[]

export const SECRET_PREFIX = 'svc_whsec_'

/**
 * A secret source's second chance on a mismatch (src/secrets/cache.ts): `match` tried again
 * against fresh reads of the source `used` was read from, while the rules allow; else the refusal.
 */
export type SecretRecheck = <T>(used: SourceSecretSet, mismatch: unknown, match: (fresh: SecretSet) => T | Promise<T>) => Promise<T>

/** Secrets imported for the HMAC. */
export interface SecretSet {
  keys: readonly SecretKey[]
  /** True when a secret lacks the `svc_whsec_` prefix: a hint for the signature error. */
  unprefixed: boolean
  /** Set when the secrets come from a secret source: its cache's second chance. */
  rematch?: SecretRecheck
}

/** Secrets read from a source: until when (on this receiver's clock) a change is pending (0: none). */
export interface SourceSecretSet extends SecretSet {
  rematch: SecretRecheck
  pendingUntil: number
  /** The secrets as read, to tell a changed state from the same one. */
  secrets: readonly string[]
}

/**
 * What is wrong with a secret value: `'none'` when there is none, a message when it is unusable,
 * undefined when it is fine. Never quotes the value.
 */
export function secretProblem(secret: unknown): string | 'none' | undefined {
  const list = typeof secret === 'string' ? [secret] : Array.isArray(secret) ? secret : undefined
  if (list === undefined || list.length === 0 || (list.length === 1 && list[0] === '')) return 'none'
  const bad = listProblem(list)
  if (bad === 'empty') return '`secret` holds an empty or non-string value. Is the environment variable set?'
  return bad && '`secret` has leading or trailing whitespace (often a newline copied with it); remove it.'
}

/** Imports checked secrets for the HMAC. */
export function importSecrets(secret: Secrets): SecretSet {
  const list: readonly string[] = typeof secret === 'string' ? [secret] : secret
  return { keys: list.map(importSecret), unprefixed: list.some((s) => !s.startsWith(SECRET_PREFIX)) }
}

/** Imported keys by secret list, per receiver: importing costs more than an HMAC. */
const LOOKUP_CACHE_SIZE = 1000

/**
 * The cache key of a list of secrets, one per list: a single secret is itself, unless it starts
 * with `[`, which is how the JSON of a list starts (a secret may hold a newline, so joining the
 * list with one would give one tenant's "a\nb" the keys of another's ["a", "b"]).
 */
function keyOf(secret: Secrets): string {
  if (typeof secret === 'string') return secret.startsWith('[') ? JSON.stringify([secret]) : secret
  return JSON.stringify(secret)
}

/**
 * The imported set of `secret`, from `cache` (one per receiver) when it was imported before.
 *
 * @example
 * const set = cachedSecrets(cache, ['svc_whsec_...'])
 */
export function cachedSecrets(cache: Map<string, SecretSet>, secret: Secrets): SecretSet {
  const cacheKey = keyOf(secret)
  let set = cache.get(cacheKey)
  if (set) return set
  set = importSecrets(secret)
  if (cache.size >= LOOKUP_CACHE_SIZE) cache.delete(cache.keys().next().value!)
  cache.set(cacheKey, set)
  return set
}
