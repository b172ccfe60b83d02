/**
 * The one place RedisHistory's key prefix is built: always with a hash tag, so every key of a
 * history lands in one Redis Cluster slot and its multi-key scripts never meet CROSSSLOT.
 */

/**
 * `prefix` with a hash tag: kept as given when it has a non-empty `{...}`, wrapped in one otherwise.
 *
 * @example
 * taggedPrefix('app:history:') // '{app:history:}'
 */
export function taggedPrefix(prefix: string): string {
  return /\{[^}]+\}/.test(prefix) ? prefix : `{${prefix}}`
}

/** An entry's member in the index: the endpoint's length first, so no endpoint and id can make another pair's member. */
export function memberOf(endpoint: string, id: string): string {
  return `${endpoint.length}:${endpoint}:${id}`
}
