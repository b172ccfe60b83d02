/**
 * What a delivery looks like to the core when the caller already holds the body: raw bytes (or
 * the UTF-8 text as received) and headers. Turning that body into bytes, size-checked, lives
 * here, and so do the two refusals about the body itself: too large, and already parsed.
 */
import { WebhookVerificationError } from './errors.js'
import type { WebhookHeaders } from './headers.js'

/** A delivery as received: the raw body exactly as sent, and the request headers. */
export interface WebhookInput {
  /** The raw body. A string must be the UTF-8 text as received, never re-serialized JSON. */
  body: Uint8Array | ArrayBuffer | string
  headers: WebhookHeaders
}

const encoder = /* @__PURE__ */ new TextEncoder()

/** Whether a held body is raw bytes or text (not an object a JSON parser made of them). */
export function isRawBody(body: unknown): body is Uint8Array | ArrayBuffer | ArrayBufferView | string {
  return body instanceof Uint8Array || typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body) || isForeignBytes(body)
}

/**
 * The length of a held raw body, known before converting it: its bytes, or for text its UTF-16
 * length (UTF-8 is at least one byte per unit, so a string longer than the limit is refused
 * before it is encoded).
 */
export function heldLength(body: Uint8Array | ArrayBuffer | ArrayBufferView | string): number {
  return typeof body === 'string' ? body.length : body.byteLength
}

/** A raw body as bytes, without copying when it already is bytes; size-checked after encoding. */
export function toBytes(body: Uint8Array | ArrayBuffer | ArrayBufferView | string, maxBodyBytes: number): Uint8Array {
  let bytes: Uint8Array
  if (body instanceof Uint8Array) bytes = body
  else if (typeof body === 'string') {
    if (body.length > maxBodyBytes) throw tooLarge(maxBodyBytes)
    bytes = encoder.encode(body)
  } else if (ArrayBuffer.isView(body)) bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
  // An ArrayBuffer, of this realm or another (vm context, worker: `instanceof` fails there).
  else bytes = new Uint8Array(body as ArrayBufferLike)
  if (bytes.byteLength > maxBodyBytes) throw tooLarge(maxBodyBytes)
  return bytes
}

/** An ArrayBuffer from another realm (vm context, worker) fails `instanceof` but is still bytes. */
function isForeignBytes(body: unknown): boolean {
  return Object.prototype.toString.call(body) === '[object ArrayBuffer]'
}

export function tooLarge(maxBodyBytes: number): WebhookVerificationError {
  return new WebhookVerificationError('body_too_large', `The body is over maxBodyBytes (${maxBodyBytes} bytes).`)
}

/**
 * The one `body_already_parsed` refusal, whatever read the body first: the core raises it when a
 * transport says the body was consumed (`WebhookTransport.consumed`), so every framework answers,
 * logs and counts it alike. The one refusal whose message keeps its fix, the common mounting
 * mistake: in verify-only mode it reaches the framework's error handler, which prints the
 * message. The fix for each framework (Hono, a Next.js Pages route) is the answers table's,
 * printed by the log line.
 */
export function bodyAlreadyParsed(): WebhookVerificationError {
  return new WebhookVerificationError(
    'body_already_parsed',
    'The raw request body is needed, but something read or parsed it first: mount webhooks() first, before any JSON body parser ' +
      '(e.g. before express.json()); with verifyWebhook, pass the bytes as received, not a parsed object.',
  )
}
