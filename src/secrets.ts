/**
 * Secrets per request (DESIGN.md "Many endpoints, one receiver"): calling the `secret` function,
 * turning its answer into the right refusal (none: 404 `unknown_endpoint`; a throw, a rejection or
 * an unusable value: 503 `secret_lookup_failed`), and keeping each secret's imported key so a
 * tenant's deliveries do not pay for the import every time.
 */
import { WebhookVerificationError } from './errors.js'
import { importSecrets, secretProblem, type ResolvedVerifyOptions, type Secrets, type SecretSet } from './options.js'

/** Imported keys by secret, shared by every lookup of a receiver: importing costs more than an HMAC. */
const LOOKUP_CACHE_SIZE = 1000

/**
 * The secrets of the endpoint a request is for, through the `secret` function: none is
 * `unknown_endpoint` (404), a throw, a rejection or an unusable value `secret_lookup_failed` (503).
 */
export async function lookupSecrets(opts: ResolvedVerifyOptions, request: unknown): Promise<SecretSet> {
  let found: unknown
  try {
    found = await opts.lookup!(request)
  } catch (error) {
    throw new WebhookVerificationError(
      'secret_lookup_failed',
      'The `secret` function threw or rejected, so this delivery could not be checked. Answered 503 so the sender retries; ' +
        'see the cause, and cache secrets so a slow store does not fail every delivery.',
      { cause: error },
    )
  }
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

const imported = new WeakMap<ResolvedVerifyOptions, Map<string, SecretSet>>()

function cachedSecrets(opts: ResolvedVerifyOptions, secret: Secrets): SecretSet {
  const cacheKey = typeof secret === 'string' ? secret : secret.join('\n')
  let cache = imported.get(opts)
  if (!cache) imported.set(opts, (cache = new Map()))
  let set = cache.get(cacheKey)
  if (set) return set
  set = importSecrets(secret)
  if (cache.size >= LOOKUP_CACHE_SIZE) cache.delete(cache.keys().next().value!)
  cache.set(cacheKey, set)
  return set
}
