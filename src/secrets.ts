/**
 * Secrets per request (DESIGN.md "Many endpoints, one receiver"): calling the `secret` function,
 * turning its answer into the right refusal (none: 404 `unknown_endpoint`; a throw, a rejection or
 * an unusable value: 503 `secret_lookup_failed`), and keeping each secret's imported key so a
 * tenant's deliveries do not pay for the import every time. A secret source, given as `secret` or
 * returned by the function, is read through its cache (src/secret-cache.ts).
 */
import { WebhookVerificationError } from './errors.js'
import { importSecrets, secretProblem, type ResolvedVerifyOptions, type Secrets, type SecretSet } from './options.js'
import { SourceCache, TIMED_OUT, within } from './secret-cache.js'
import { isSecretSource, type SecretSource } from './secret-source.js'

/** Imported keys by secret, shared by every lookup of a receiver: importing costs more than an HMAC. */
const LOOKUP_CACHE_SIZE = 1000

/**
 * The secrets of a request when they are not fixed: from the secret source (its cached state, or
 * its first read), or through the `secret` function.
 */
export function secretsFor(opts: ResolvedVerifyOptions, request: unknown): SecretSet | Promise<SecretSet> {
  if (opts.source !== undefined) return (opts.sourceCache ??= new SourceCache(opts.source, opts.sourceSettings)).current()
  return lookupSecrets(opts, request)
}

/**
 * The secrets of the endpoint a request is for, through the `secret` function: none is
 * `unknown_endpoint` (404), a throw, a rejection or an unusable value `secret_lookup_failed` (503).
 */
export async function lookupSecrets(opts: ResolvedVerifyOptions, request: unknown): Promise<SecretSet> {
  let found: unknown
  try {
    found = await within(opts.lookup!(request), opts.sourceSettings.readTimeoutMs)
  } catch (error) {
    throw new WebhookVerificationError(
      'secret_lookup_failed',
      'The `secret` function threw or rejected, so this delivery could not be checked. Answered 503 so the sender retries; ' +
        'see the cause, and cache secrets so a slow store does not fail every delivery.',
      { cause: error },
    )
  }
  if (found === TIMED_OUT) {
    throw new WebhookVerificationError(
      'secret_lookup_failed',
      'The `secret` function did not answer within secretReadTimeoutMs, so this delivery could not be checked. Answered 503 so the ' +
        'sender retries; cache secrets so a slow store does not fail every delivery.',
    )
  }
  if (isSecretSource(found)) return tenantSource(opts, found).current()
  const problem = secretProblem(found)
  if (problem === 'none') {
    throw new WebhookVerificationError(
      'unknown_endpoint',
      'The `secret` function returned no secret for this request: no endpoint is registered for it here.',
    )
  }
  if (problem) {
    throw new WebhookVerificationError('secret_lookup_failed', `The \`secret\` function returned an unusable value: ${problem.replace('`secret` ', 'it ')}`)
  }
  return cachedSecrets(opts, found as Secrets)
}

/** The cache of a source the `secret` function returned, kept as long as the source object lives. */
function tenantSource(opts: ResolvedVerifyOptions, source: SecretSource): SourceCache {
  const caches = (opts.sourceCaches ??= new WeakMap())
  let cache = caches.get(source)
  if (cache === undefined) caches.set(source, (cache = new SourceCache(source, opts.sourceSettings)))
  return cache
}

const imported = new WeakMap<ResolvedVerifyOptions, Map<string, SecretSet>>()

/**
 * The cache key of a list of secrets, one per list: a single secret is itself, unless it starts
 * with `[`, which is how the JSON of a list starts (a secret may hold a newline, so joining the
 * list with one would give one tenant's "a\nb" the keys of another's ["a", "b"]).
 */
function keyOf(secret: Secrets): string {
  if (typeof secret === 'string') return secret.startsWith('[') ? JSON.stringify([secret]) : secret
  return JSON.stringify(secret)
}

function cachedSecrets(opts: ResolvedVerifyOptions, secret: Secrets): SecretSet {
  const cacheKey = keyOf(secret)
  let cache = imported.get(opts)
  if (!cache) imported.set(opts, (cache = new Map()))
  let set = cache.get(cacheKey)
  if (set) return set
  set = importSecrets(secret)
  if (cache.size >= LOOKUP_CACHE_SIZE) cache.delete(cache.keys().next().value!)
  cache.set(cacheKey, set)
  return set
}
