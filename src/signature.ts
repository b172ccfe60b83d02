/**
 * Signature matching (spec/service-api.md §6.2, DESIGN.md "Verification rules" 1-8): the HMAC
 * over the raw bytes under each configured secret, several `v2=` values, constant-time
 * comparison (by the crypto build, src/crypto/*), a secret source's second chance on a mismatch,
 * and the event type from the signed body. The order of the checks around it (src/verify.ts)
 * comes first; this file only matches.
 */
import { decodeUtf8, hmacMatches } from '#crypto'
import { WebhookVerificationError } from './errors.js'
import type { WebhookEvent } from './events.js'
import type { SignedHeaders } from './headers.js'
import { SECRET_PREFIX, type SecretSet, type SourceSecretSet } from './secrets/index.js'

/** A delivery whose signature and timestamp were verified; the body is not parsed yet. */
export interface VerifiedSignature {
  /** `svc-webhook-id`: stable across retries and resends (spec §6.1). Covered by v2 only. */
  id: string
  /** `svc-webhook-timestamp`, in Unix seconds: fresh on every attempt. */
  timestamp: number
  /** Which scheme verified the delivery. `'v1'` only when `allowV1` is on. */
  signatureVersion: 'v2' | 'v1'
  /** Index in `secret` (when it is an array) of the secret that matched. */
  secretIndex: number
  /** The body exactly as received. */
  rawBody: Uint8Array
}

/** A verified delivery with its parsed, typed event. */
export interface VerifiedDelivery<E = WebhookEvent> extends VerifiedSignature {
  /** The parsed body; its `event` field (not the unsigned `svc-webhook-event` header) names the type. */
  event: E
  /**
   * Given by the inbox worker and the Queues consumer: aborted when the handler's deadline
   * (`handlerTimeoutMs`) passes, its lease is lost, or `stop()` gives up waiting. Pass it to
   * `fetch` and database calls so an abandoned run stops too. Absent in the request path.
   */
  signal?: AbortSignal
  /**
   * Given by an inbox worker with `ordering`: true when a delivery of the same key with a later
   * `created_at` was already processed (this one arrived or succeeded late). It still runs.
   */
  late?: boolean
}

/**
 * The HMAC over the raw body for headers that passed the core's header checks (`checkBeforeBody`
 * in src/verify.ts: a header without one well-formed value is refused there, with no HMAC):
 * synchronous with node:crypto, a promise only when the crypto build's HMAC is one (WebCrypto).
 * The body is parsed (when `parse`) only once a signature matched. Throws when none matches.
 */
export function matchSignature(
  signed: SignedHeaders,
  body: Uint8Array,
  secrets: SecretSet,
  parse: boolean,
  from = 0,
): VerifiedDelivery | VerifiedSignature | Promise<VerifiedDelivery | VerifiedSignature> {
  const prefix = signed.version === 'v2' ? `${signed.id}.${signed.timestampText}.` : `${signed.timestampText}.`
  const { keys } = secrets
  for (let i = from; i < keys.length; i++) {
    // node:crypto answers at once; WebCrypto returns a promise, and the loop goes on from the next secret once it answers.
    const matched = hmacMatches(keys[i]!, prefix, body, signed.signatures)
    if (matched === true) return verified(signed, i, body, parse)
    // Promise.resolve: a promise of this realm, as the callers test `instanceof Promise`, where
    // WebCrypto's may be another realm's (the Next.js Edge sandbox's crypto is the host's).
    if (matched !== false) return Promise.resolve(matched).then((ok) => (ok ? verified(signed, i, body, parse) : matchSignature(signed, body, secrets, parse, i + 1)))
  }
  throw invalidSignature(signed.version, secrets)
}

/**
 * {@link matchSignature} for secrets of any origin. Secrets read from a secret source get a
 * second chance on a mismatch (their cache's `rematch`, src/secrets/cache.ts): the delivery is
 * matched against a fresh read, and held while a change is pending there.
 */
export function matchSecrets(
  signed: SignedHeaders,
  body: Uint8Array,
  secrets: SecretSet,
  parse: boolean,
): VerifiedDelivery | VerifiedSignature | Promise<VerifiedDelivery | VerifiedSignature> {
  const { rematch } = secrets
  if (rematch === undefined) return matchSignature(signed, body, secrets, parse)
  const again = (error: unknown) => rematch(secrets as SourceSecretSet, error, (fresh) => matchSignature(signed, body, fresh, parse))
  let matched: ReturnType<typeof matchSignature>
  try {
    matched = matchSignature(signed, body, secrets, parse)
  } catch (error) {
    return again(error)
  }
  return matched instanceof Promise ? matched.catch(again) : matched
}

/** The answer, built once: with the parsed event for `verifyWebhook`, without for `verifySignature`. */
function verified(signed: SignedHeaders, secretIndex: number, rawBody: Uint8Array, parse: boolean): VerifiedSignature | VerifiedDelivery {
  const { id, timestamp, version: signatureVersion } = signed
  if (!parse) return { id, timestamp, signatureVersion, secretIndex, rawBody }
  return { id, timestamp, signatureVersion, secretIndex, rawBody, event: parseEvent(rawBody) }
}

function invalidSignature(version: 'v2' | 'v1', secrets: SecretSet): WebhookVerificationError {
  const unprefixed = secrets.unprefixed ? ` A configured secret lacks the "${SECRET_PREFIX}" prefix: use the whole value.` : ''
  return new WebhookVerificationError('invalid_signature', `No ${version} signature matched the ${secrets.keys.length === 1 ? 'configured secret' : `${secrets.keys.length} configured secrets`}.${unprefixed}`)
}

/** Parses a verified body: UTF-8 JSON, an object with a string `event`. */
function parseEvent(rawBody: Uint8Array): WebhookEvent {
  let event: unknown
  try {
    event = JSON.parse(decodeUtf8(rawBody))
  } catch {
    // No `cause`: the parser's message quotes the body, and a body never goes into an error.
    throw new WebhookVerificationError('invalid_json', 'The verified body is not UTF-8 JSON.')
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event) || typeof (event as { event?: unknown }).event !== 'string') {
    throw new WebhookVerificationError('invalid_json', 'The verified body has no string "event" field.')
  }
  return event as WebhookEvent
}
