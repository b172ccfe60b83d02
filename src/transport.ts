/**
 * The one request path up to a verified delivery, for any framework: what an adapter supplies
 * (method, one header, the raw bytes) and the order of the checks. Everything that does not
 * need the body runs first (declared length, then the header checks), so a refused request never
 * waits for its body; then the body is read within `maxBodyBytes` and `bodyTimeoutMs`, and the
 * signature is checked over those exact bytes.
 */
import { readSignedHeaders, requireWellFormed, type HeaderGetter, type SignedHeaders } from './headers.js'
import { tooLarge } from './input.js'
import type { ResolvedVerifyOptions } from './options.js'
import { secretsFor } from './secrets.js'
import { declaresTooMuch } from './read-body.js'
import { matchSecrets, type VerifiedDelivery } from './verify.js'

/**
 * What an adapter supplies for its framework's request type `R`: the method, one header, and the
 * raw bytes. Everything else (the order of the checks, the limits, the deadline, the answer) is
 * the receiver's. Create it once, not per request.
 *
 * @example
 * const transport: WebhookTransport<IncomingMessage> = {
 *   method: (req) => req.method,
 *   header: (req, name) => req.headers[name],
 *   body: (req, maxBodyBytes, timeoutMs) => readNodeBody(req, maxBodyBytes, timeoutMs),
 * }
 * const answer = await receiver.receive(req, transport)
 */
export interface WebhookTransport<R> {
  method(request: R): string | undefined
  /** Header `name` (lowercase); a repeated header as an array. */
  header: HeaderGetter<R>
  /** The raw body as received: at most `maxBodyBytes`, within `timeoutMs` (reject with the core's errors). */
  body(request: R, maxBodyBytes: number, timeoutMs: number): Promise<Uint8Array> | Uint8Array
  /**
   * Called once the answer is ready: drop whatever of the body was not read (a request refused
   * before its body), bounded by `timeoutMs`, so the answer reaches a client still writing.
   */
  discard?(request: R, timeoutMs: number): void
}

/**
 * Every check that does not need the body, in the answers' order: the declared length, then the
 * headers (id, timestamp, signature presence and format). Throws a `WebhookVerificationError`.
 */
export function checkBeforeBody<R>(request: R, transport: WebhookTransport<R>, opts: ResolvedVerifyOptions): SignedHeaders {
  if (declaresTooMuch(transport.header(request, 'content-length'), opts.maxBodyBytes)) throw tooLarge(opts.maxBodyBytes)
  const signed = readSignedHeaders(request, transport.header, opts)
  requireWellFormed(signed)
  return signed
}

/**
 * Verifies a framework's request through its transport: declared length, header checks, the
 * bounded and deadline-limited read, then the HMAC and the parse. Throws a
 * `WebhookVerificationError`. Used by the verify-only adapters; the receiver runs the same steps
 * inline (one promise fewer per delivery).
 */
export async function verifyTransported<R>(request: R, transport: WebhookTransport<R>, opts: ResolvedVerifyOptions): Promise<VerifiedDelivery> {
  const signed = checkBeforeBody(request, transport, opts)
  const secrets = opts.secrets ?? (await secretsFor(opts, request))
  const read = transport.body(request, opts.maxBodyBytes, opts.bodyTimeoutMs)
  // node:crypto answers at once, and a body already held needs no waiting: no promise then.
  const matched = matchSecrets(signed, read instanceof Uint8Array ? read : await read, secrets, true)
  return (matched instanceof Promise ? await matched : matched) as VerifiedDelivery
}
