/**
 * The secret source contract (DESIGN.md "Endpoint lifecycle without loss"): a place every process
 * of a receiver reads its endpoint's secrets from, so a rotation reaches all of them without a
 * restart. Implementations: `RedisSecretSource` (svc-webhooks/redis), `PostgresSecretSource`
 * (svc-webhooks/postgres), `FileSecretSource` (svc-webhooks/service), or your own.
 */

/**
 * What a secret source holds: the endpoint's secrets (newest first) and, while a change is in
 * flight (a rotation or a new endpoint whose secret is not stored yet), when that change is
 * expected to be over. While `pendingUntil` is in the future, a delivery whose signature matches
 * none of `secrets` is answered 503 `secret_pending` with `Retry-After` instead of 401, so the
 * sender comes back once the new secret is stored.
 */
export interface SecretState {
  /** Newest first. May be empty only while `pendingUntil` is set (an endpoint being registered). */
  secrets: readonly string[]
  /** Milliseconds since the epoch. The receiver never honours more than its own bound (60 s by default) past its read. */
  pendingUntil?: number
}

/**
 * A shared place to read an endpoint's secrets from, and to write them during a rotation.
 *
 * @example
 * const source: SecretSource = {
 *   read: async () => ({ secrets: [await vault.get('svc-webhook-secret')] }),
 * }
 * app.post('/webhooks/svc', webhooks({ secret: source, on }))
 */
export interface SecretSource {
  /** The current state. A throw or rejection is answered 503 (the sender retries). */
  read(): Promise<SecretState> | SecretState
  /** Replaces the state; needed by `rotateEndpointSecret` and `registerEndpoint`. */
  write?(state: SecretState): Promise<void> | void
}

/** True for an object that implements {@link SecretSource} (has a `read` function). */
export function isSecretSource(value: unknown): value is SecretSource {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as SecretSource).read === 'function'
}
