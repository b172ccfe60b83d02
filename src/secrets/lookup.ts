/**
 * Secrets per request (DESIGN.md "Many endpoints, one receiver"): calling the `secret` function,
 * turning its answer into the right refusal (none: 404 `unknown_endpoint`; a throw, a rejection or
 * an unusable value: 503 `secret_lookup_failed`), and keeping each secret's imported key so a
 * tenant's deliveries do not pay for the import every time. A secret source, given as `secret` or
 * returned by the function, is read through its cache (src/secrets/cache.ts).
 */
import { WebhookVerificationError } from '../errors.js'
import { createSourceCache, lookupFailed, type SourceCache, type SourceSettings } from './cache.js'
import { isSecretSource, type SecretSource } from './contract.js'
import { cachedSecrets, secretProblem, type Secrets, type SecretSet } from './list.js'
import { TIMED_OUT, within } from './within.js'

/**
 * A secret per request, for a platform with one endpoint (and one secret) per customer: a function
 * of the framework's own request, sync or async. Return `undefined` (or `null`, `''`, `[]`) when
 * the request names no known endpoint: it is answered 404 `unknown_endpoint`. A throw or a
 * rejection is answered 503 `secret_lookup_failed` with `Retry-After`, so the sender retries.
 * It may return the tenant's {@link SecretSource} instead: return the same object for a tenant
 * every time (keep them in a Map), as its cache lives with it.
 */
export type SecretLookup<R> = (
  request: R,
) => Secrets | SecretSource | null | undefined | Promise<Secrets | SecretSource | null | undefined>

/** Where a receiver's secrets come from, after validation: what the rest of this folder needs of the options. */
export interface SecretOptions {
  /** The secrets, when they are fixed at startup. */
  secrets?: SecretSet
  /** The per-request lookup, when `secret` is a function. */
  lookup?: SecretLookup<unknown>
  /** The secret source, when `secret` is one. */
  source?: SecretSource
  /** The caches of the sources, by source: `source`'s own and those a lookup returned, each made on first use. */
  sourceCaches?: WeakMap<SecretSource, SourceCache>
  /** Imported keys of the lists a lookup returned. */
  imported?: Map<string, SecretSet>
  /** How sources are read: the `secret*Ms` options, `maxPendingMs` and `pendingHoldMs`. */
  sourceSettings: SourceSettings
}

/**
 * The secrets of a request when they are not fixed: from the secret source (its cached state, or
 * its first read), or through the `secret` function.
 */
export function secretsFor(opts: SecretOptions, request: unknown): SecretSet | Promise<SecretSet> {
  return opts.source !== undefined ? cacheOf(opts, opts.source).current() : lookupSecrets(opts, request)
}

/**
 * The secrets of the endpoint a request is for, through the `secret` function: none is
 * `unknown_endpoint` (404), a throw, a rejection or an unusable value `secret_lookup_failed` (503).
 */
export async function lookupSecrets(opts: SecretOptions, request: unknown): Promise<SecretSet> {
  let found: unknown
  try {
    found = await within(opts.lookup!(request), opts.sourceSettings.readTimeoutMs)
  } catch (error) {
    throw lookupFailed('The `secret` function threw or rejected.', error)
  }
  if (found === TIMED_OUT) throw lookupFailed('The `secret` function did not answer within secretReadTimeoutMs.')
  if (isSecretSource(found)) return cacheOf(opts, found).current()
  const problem = secretProblem(found)
  if (problem === 'none') throw new WebhookVerificationError('unknown_endpoint', 'The `secret` function returned no secret for this request.')
  if (problem) throw lookupFailed(`The \`secret\` function returned an unusable value: ${problem.replace('`secret` ', 'it ')}`)
  return cachedSecrets((opts.imported ??= new Map()), found as Secrets)
}

/** The cache of a source (`secret`'s own, or one the `secret` function returned), kept as long as the source object lives. */
function cacheOf(opts: SecretOptions, source: SecretSource): SourceCache {
  const caches = (opts.sourceCaches ??= new WeakMap())
  let cache = caches.get(source)
  if (cache === undefined) caches.set(source, (cache = createSourceCache(source, opts.sourceSettings)))
  return cache
}
