/**
 * Verification options: the one exported options type, its defaults, and the check that turns
 * invalid options into a startup error instead of a silent pass (STYLE.md "Options").
 */
import { positiveOption, waitOption } from './option-checks.js'
import { DEFAULT_BODY_TIMEOUT_MS } from './read-body.js'
import {
  importSecrets,
  isSecretSource,
  secretProblem,
  type SecretLookup,
  type SecretOptions,
  type Secrets,
  type SecretSet,
  type SecretSource,
} from './secrets/index.js'

export { SECRET_PREFIX, type SecretLookup, type Secrets, type SecretSet } from './secrets/index.js'

/** Options shared by `verifyWebhook`, `createWebhookReceiver` and every adapter; `R` is the entry's request type. */
export interface VerifyOptions<R = any> {
  /**
   * The endpoint's signing secret (`svc_whsec_...`) exactly as the service returned it, or several
   * during a rotation: the service stops the old secret at once (spec §4.1), so keep the old and
   * the new one here while your own deploy rolls out. Or a function of the request returning the
   * secret(s) of the endpoint it is for (many endpoints, one receiver): see {@link SecretLookup}.
   * Or a {@link SecretSource} every process reads (`RedisSecretSource`, `PostgresSecretSource`,
   * `FileSecretSource`, your own), so a rotation reaches them all without a restart: read through
   * a cache, re-read on a signature mismatch (docs/secret-sources.md).
   */
  secret: Secrets | SecretSource | SecretLookup<R>
  /**
   * How far the signed timestamp may be from now, in seconds, in either direction.
   * Must be a positive number: 0 does not mean "skip".
   * @default 300
   */
  toleranceSeconds?: number
  /**
   * Accept deliveries that carry only the legacy v1 signature. v1 does not cover the delivery id,
   * so a v1-verified delivery is never deduplicated by it.
   * @default false
   */
  allowV1?: boolean
  /**
   * Largest body accepted, in bytes; larger ones are refused with 413 before being buffered.
   * @default 1048576 (1 MiB)
   */
  maxBodyBytes?: number
  /**
   * The read deadline: a body still arriving after this many milliseconds is abandoned and
   * answered 503 with `Retry-After` (never 408, which the sender would treat as permanent).
   * Where the platform buffers the body before your code runs (Lambda, Next.js Edge), it has no effect.
   * @default 10000 (the sender's own timeout)
   */
  bodyTimeoutMs?: number
  /**
   * The clock, in milliseconds since the epoch. Inject a fixed one in tests.
   * @default Date.now
   */
  now?: () => number
  /**
   * With a secret source: a cached state older than this is re-read in the background (never
   * blocking a delivery), so a removed secret stops verifying within about this long.
   * @default 60000
   */
  secretRefreshMs?: number
  /**
   * With a secret source: least time between two re-reads after a signature mismatch. A delivery
   * that matched none of the cached secrets waits for a read that started after it arrived, so a
   * rotation is never answered 401; this spacing bounds what forged requests cost the source.
   * @default 1000
   */
  secretRereadMs?: number
  /**
   * A read of the secret source, or a call of the `secret` or `endpoint` function, still pending
   * after this long counts as failed (answered 503 `secret_lookup_failed`, which the sender
   * retries), so a slow lookup cannot push an answer past the sender's 10 s.
   * @default 2000
   */
  secretReadTimeoutMs?: number
  /**
   * With a secret source: the longest a pending state (`pendingUntil`) is honoured, counted from
   * the read that first saw it, so no source can hold the receiver in 503 `secret_pending`.
   * @default 60000
   */
  maxPendingMs?: number
  /**
   * With a secret source: while a change is pending, how long a delivery that matches none of the
   * secrets is held while the source is re-read, so it is answered 2xx once the new secret is
   * stored (a rotation's call that takes a few seconds costs the sender no failed answer). Only
   * past this is it answered 503 `secret_pending`, inside the sender's 10 s.
   * @default 8000
   */
  pendingHoldMs?: number
}

/** Options after validation, with each secret imported once. */
export interface ResolvedVerifyOptions extends SecretOptions {
  toleranceSeconds: number
  allowV1: boolean
  maxBodyBytes: number
  bodyTimeoutMs: number
  now: () => number
}

export const DEFAULT_TOLERANCE_SECONDS = 300
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

const cache = new WeakMap<object, ResolvedVerifyOptions>()

function fail(message: string): never {
  throw new TypeError(`svc-webhooks: ${message}`)
}

/**
 * Validates options once and caches the result by object identity, so a receiver (or a caller
 * passing the same options object to `verifyWebhook`) pays for validation and key import once.
 */
export function resolveVerifyOptions(options: VerifyOptions): ResolvedVerifyOptions {
  if (typeof options !== 'object' || options === null) fail('options are required: pass { secret }.')
  const cached = cache.get(options)
  if (cached) return cached
  const {
    secret,
    toleranceSeconds = DEFAULT_TOLERANCE_SECONDS,
    allowV1 = false,
    maxBodyBytes = DEFAULT_MAX_BODY_BYTES,
    bodyTimeoutMs = DEFAULT_BODY_TIMEOUT_MS,
    now = Date.now,
    secretRefreshMs = 60_000,
    secretRereadMs = 1000,
    secretReadTimeoutMs = 2000,
    maxPendingMs = 60_000,
    pendingHoldMs = 8000,
  } = options
  let secrets: SecretSet | undefined
  // A function or a source is checked per request (src/secrets/lookup.ts).
  if (typeof secret !== 'function' && !isSecretSource(secret)) {
    const problem = secretProblem(secret)
    if (problem === 'none') fail('`secret` is required: the signing secret (svc_whsec_...), an array of them, a secret source or a function. Is the environment variable set?')
    if (problem) fail(problem)
    secrets = importSecrets(secret)
  }
  if (!(typeof toleranceSeconds === 'number' && toleranceSeconds > 0 && toleranceSeconds < Infinity)) fail('`toleranceSeconds` must be a positive number of seconds; it cannot switch the timestamp check off.')
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) fail('`maxBodyBytes` must be a positive whole number of bytes.')
  if (typeof allowV1 !== 'boolean') fail('`allowV1` must be a boolean.')
  if (typeof now !== 'function') fail('`now` must be a function returning milliseconds since the epoch.')
  for (const [name, value] of Object.entries({ bodyTimeoutMs, secretRefreshMs, secretRereadMs, secretReadTimeoutMs, maxPendingMs })) positiveOption(value, `\`${name}\``)
  // Past 9.5 s the sender has given up on the attempt: a 503 it never reads is one more failure.
  waitOption(pendingHoldMs, '`pendingHoldMs`', 9500)
  const resolved: ResolvedVerifyOptions = {
    ...(secrets ? { secrets } : isSecretSource(secret) ? { source: secret } : { lookup: secret as SecretLookup<unknown> }),
    sourceSettings: {
      refreshMs: secretRefreshMs,
      rereadMs: secretRereadMs,
      readTimeoutMs: secretReadTimeoutMs,
      maxPendingMs,
      holdMs: pendingHoldMs,
      now,
      log: (line) => console.warn(line),
    },
    toleranceSeconds,
    allowV1,
    maxBodyBytes,
    bodyTimeoutMs,
    now,
  }
  cache.set(options, resolved)
  return resolved
}
