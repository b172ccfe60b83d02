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

/**
 * The endpoint and the id of a member made by {@link memberOf}.
 *
 * @example
 * ofMember('7:default:evt_1') // { endpoint: 'default', id: 'evt_1' }
 */
export function ofMember(member: string): { endpoint: string; id: string } {
  const colon = member.indexOf(':')
  const length = Number(member.slice(0, colon))
  return { endpoint: member.slice(colon + 1, colon + 1 + length), id: member.slice(colon + length + 2) }
}
