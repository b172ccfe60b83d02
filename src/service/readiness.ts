/**
 * A receiver's readiness, for the `watch` option's re-enable: a disabled endpoint receives
 * nothing, so readiness cannot wait for a delivery. It is judged from what a delivery would need:
 * the store (a claim and a release under a key no delivery can have) or the inbox (its stats)
 * answers, the secret reads, and a probe signed with the current secret passes the receiver's own
 * verification, never its handlers. A receiver that would refuse is never re-enabled.
 *
 * What it cannot see: whether that secret is the one the service signs with. The probe is signed
 * with the receiver's own secret, and the service's API shows its secret only by rotating it, so
 * a stale secret passes. The watch (watch.ts) bounds that instead: a re-enable the service undoes
 * with no delivery delivered in between is not tried again until someone enables the endpoint.
 */
import { hmacHex, importSecret } from '#crypto'
import { isWebhookVerificationError } from '../errors.js'
import { HEADER_ID, HEADER_SIGNATURE_V2, HEADER_TIMESTAMP } from '../headers.js'
import { errorLabel } from '../log-window.js'
import { isSecretSource } from '../secrets/index.js'
import type { Readiness, ReadinessParts } from '../contracts/watch.js'

export type { ReadinessParts } from '../contracts/watch.js'

/** How long one check may take before the receiver counts as not ready. */
const CHECK_TIMEOUT_MS = 5_000
const PROBE_BODY = new TextEncoder().encode('{"event":"svc-webhooks.probe"}')

/** Resolves `call`'s answer, or rejects once `CHECK_TIMEOUT_MS` passed without one. */
function bounded<T>(call: () => T | Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('no answer'), { name: 'Timeout' })), CHECK_TIMEOUT_MS)
  })
  return Promise.race([Promise.resolve().then(call), timeout]).finally(() => clearTimeout(timer))
}

/**
 * The readiness of a receiver or a worker: undefined when ready, else a short phrase saying
 * which check failed (never a secret or an error's message).
 *
 * @example
 * const why = await readinessOf({ secret, verify: (input) => verifySignature(input, options), store })()
 * // undefined when ready, or e.g. 'its store did not answer (Timeout)'
 */
export function readinessOf({ secret: given, verify, now = Date.now, store, inbox }: ReadinessParts): Readiness {
  return async () => {
    try {
      if (typeof inbox?.stats === 'function') await bounded(() => inbox.stats!())
    } catch (error) {
      return `its inbox did not answer (${errorLabel(error)})`
    }
    try {
      if (store) {
        // A space and no colon: no delivery's key (`<namespace>:<id>`) looks like this.
        const key = `probe ${crypto.randomUUID()}`
        const claimed = await bounded(() => store.claim(key, key, CHECK_TIMEOUT_MS))
        await bounded(() => store.release(key, key))
        if (claimed !== 'claimed') return `its store answered ${String(claimed)} to a fresh key`
      }
    } catch (error) {
      return `its store did not answer (${errorLabel(error)})`
    }
    if (!verify) return undefined
    let secret: unknown
    try {
      secret = isSecretSource(given) ? (await bounded(() => given.read())).secrets?.[0] : [given].flat()[0]
    } catch (error) {
      return `its secret source could not be read (${errorLabel(error)})`
    }
    if (typeof secret !== 'string' || secret.length === 0) return 'its secret source holds no secret yet'
    const id = crypto.randomUUID()
    const timestamp = String(Math.floor(now() / 1000))
    try {
      const digest = await hmacHex(importSecret(secret), `${id}.${timestamp}.`, PROBE_BODY)
      const headers = { [HEADER_ID]: id, [HEADER_TIMESTAMP]: timestamp, [HEADER_SIGNATURE_V2]: `v2=${digest}` }
      await bounded(() => verify({ body: PROBE_BODY, headers }))
    } catch (error) {
      return `its own verification refused a probe signed with its current secret (${isWebhookVerificationError(error) ? error.code : errorLabel(error)})`
    }
    return undefined
  }
}
