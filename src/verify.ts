/**
 * The one verification every mode runs (the receiver, verify-only middleware, `verifyWebhook`):
 * a body something else already read is refused first, then every check that needs no body (the
 * declared length, the headers), then the secrets, the bounded read, and the signature over
 * those exact bytes (src/signature.ts). Synchronous as long as each step is (a held body, fixed
 * secrets, node:crypto): no promise where none is needed.
 */
import { getHeader, readSignedHeaders, requireWellFormed, type SignedHeaders, type WebhookHeaders } from './headers.js'
import { bodyAlreadyParsed, heldLength, isRawBody, toBytes, tooLarge, type WebhookInput } from './input.js'
import { resolveVerifyOptions, type ResolvedVerifyOptions, type VerifyOptions } from './options.js'
import { declaresTooMuch } from './read-body.js'
import { secretsFor, type SecretSet } from './secrets/index.js'
import { matchSecrets, type VerifiedDelivery, type VerifiedSignature } from './signature.js'
import type { WebhookTransport } from './transport.js'

export type { VerifiedDelivery, VerifiedSignature } from './signature.js'

/**
 * How far a verification got, filled in as it goes: the receiver builds its dedupe keys from
 * these, and tells a tenant's refusal from a made-up endpoint's by whether secrets were found.
 */
export interface VerifyProgress {
  signed?: SignedHeaders
  secrets?: SecretSet
}

/** A transport whose body is already held: its length is known before the headers are read. */
interface HeldTransport<R> extends WebhookTransport<R> {
  length(request: R): number
}

/**
 * Verifies a request through its transport, in the answers' order. Returns the delivery, or a
 * promise of it when a step is asynchronous; throws (or rejects with) the refusal, a
 * `WebhookVerificationError`. `parse: false` stops after the signature (`verifySignature`).
 */
export function verifyDelivery<R>(
  request: R,
  transport: WebhookTransport<R>,
  opts: ResolvedVerifyOptions,
  parse: boolean,
  progress?: VerifyProgress,
): VerifiedDelivery | VerifiedSignature | Promise<VerifiedDelivery | VerifiedSignature> {
  if (transport.consumed?.(request)) throw bodyAlreadyParsed()
  const signed = checkBeforeBody(request, transport, opts)
  if (progress) progress.signed = signed
  const secrets = opts.secrets ?? secretsFor(opts, request)
  if (secrets instanceof Promise) return secrets.then((found) => readAndMatch(request, transport, opts, signed, found, parse, progress))
  return readAndMatch(request, transport, opts, signed, secrets, parse, progress)
}

/**
 * Every check that needs no body, in the answers' order: the length (a held body's own, or the
 * declared Content-Length), then the headers (id, timestamp, signature presence and format).
 */
function checkBeforeBody<R>(request: R, transport: WebhookTransport<R>, opts: ResolvedVerifyOptions): SignedHeaders {
  const held = (transport as Partial<HeldTransport<R>>).length
  if (held ? held(request) > opts.maxBodyBytes : declaresTooMuch(transport.header(request, 'content-length'), opts.maxBodyBytes)) {
    throw tooLarge(opts.maxBodyBytes)
  }
  const signed = readSignedHeaders(request, transport.header, opts)
  requireWellFormed(signed)
  return signed
}

function readAndMatch<R>(
  request: R,
  transport: WebhookTransport<R>,
  opts: ResolvedVerifyOptions,
  signed: SignedHeaders,
  secrets: SecretSet,
  parse: boolean,
  progress: VerifyProgress | undefined,
): VerifiedDelivery | VerifiedSignature | Promise<VerifiedDelivery | VerifiedSignature> {
  if (progress) progress.secrets = secrets
  const read = transport.body(request, opts.maxBodyBytes, opts.bodyTimeoutMs)
  // A body already held needs no waiting, and node:crypto answers at once: no promise then.
  if (read instanceof Uint8Array) return matchSecrets(signed, read, secrets, parse)
  return read.then((body) => matchSecrets(signed, body, secrets, parse))
}

/** A delivery whose body the caller holds (`verifyWebhook`, `receiver.handle`), maybe with a method. */
export type HeldRequest = Partial<WebhookInput> & { method?: string }

/**
 * The transport of a held delivery. Anything but raw bytes or text as the body (a parsed object,
 * or no `{ body, headers }` at all) is a consumed body. A `content-length` among the headers is
 * the original request's, not this body's: the held length is used instead.
 */
export const heldTransport: HeldTransport<HeldRequest> = {
  // Safe on anything: `handle` and `verifyWebhook` may be given no object at all (refused as consumed).
  method: (request) => request?.method,
  header: (request, name) => getHeader((request?.headers ?? {}) as WebhookHeaders, name),
  consumed: (request) => typeof request !== 'object' || request === null || !isRawBody(request.body),
  length: (request) => heldLength(request.body!),
  body: (request, maxBodyBytes) => toBytes(request.body!, maxBodyBytes),
}

/**
 * Verifies a delivery's signature and timestamp over its raw bytes and parses its event.
 * Throws a {@link WebhookVerificationError} (with `code` and `status`) when the delivery is refused.
 *
 * @example
 * const delivery = await verifyWebhook({ body: rawBytes, headers: request.headers }, {
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 * })
 * if (isEventType(delivery.event, 'message.received')) console.log(delivery.event.message.text)
 */
export function verifyWebhook(input: WebhookInput, options: VerifyOptions): Promise<VerifiedDelivery> {
  return settle(input, options, true) as Promise<VerifiedDelivery>
}

/**
 * The signature and timestamp checks of {@link verifyWebhook} without parsing the body: for
 * callers that parse it themselves or forward the bytes.
 *
 * @example
 * const { id, rawBody } = await verifySignature({ body, headers }, { secret })
 */
export function verifySignature(input: WebhookInput, options: VerifyOptions): Promise<VerifiedSignature> {
  return settle(input, options, false)
}

/**
 * Not `async`: with node:crypto the whole check is synchronous, and an async function (or an
 * await on a plain value) costs more than all the header checks together. `Promise.resolve`
 * hands a WebCrypto promise back as is.
 */
function settle(input: WebhookInput, options: VerifyOptions, parse: boolean): Promise<VerifiedSignature> {
  try {
    return Promise.resolve(verifyDelivery(input as HeldRequest, heldTransport, resolveVerifyOptions(options), parse))
  } catch (error) {
    return Promise.reject(error)
  }
}
