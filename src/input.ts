/**
 * What a delivery looks like to the core when the caller already holds the body: raw bytes (or
 * the UTF-8 text as received) and headers. Turning that body into bytes, size-checked, lives here.
 */
import { WebhookVerificationError } from './errors.js'
import type { WebhookHeaders } from './headers.js'

/** A delivery as received: the raw body exactly as sent, and the request headers. */
export interface WebhookInput {
  /** The raw body. A string must be the UTF-8 text as received, never re-serialized JSON. */
  body: Uint8Array | ArrayBuffer | string
  headers: WebhookHeaders
}

const encoder = new TextEncoder()

const PARSED_BODY_FIX =
  'The raw request body is needed to verify the signature, but a parsed object was passed. ' +
  'Pass the bytes as received: mount the webhook route before any JSON body parser ' +
  '(e.g. before express.json()), or use express.raw({ type: "*/*" }) / request.arrayBuffer().'

/** The body as bytes, without copying when it already is bytes; size-checked before encoding. */
export function toBytes(body: unknown, maxBodyBytes: number): Uint8Array {
  let bytes: Uint8Array
  if (body instanceof Uint8Array) bytes = body
  else if (typeof body === 'string') {
    // UTF-8 is at least one byte per UTF-16 unit: refuse an obviously large string before encoding it.
    if (body.length > maxBodyBytes) throw tooLarge(maxBodyBytes)
    bytes = encoder.encode(body)
  } else if (body instanceof ArrayBuffer) bytes = new Uint8Array(body)
  else if (ArrayBuffer.isView(body)) bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
  else if (isForeignBytes(body)) bytes = new Uint8Array(body as ArrayBufferLike)
  else throw new WebhookVerificationError('body_already_parsed', PARSED_BODY_FIX)
  if (bytes.byteLength > maxBodyBytes) throw tooLarge(maxBodyBytes)
  return bytes
}

/** An ArrayBuffer from another realm (vm context, worker) fails `instanceof` but is still bytes. */
function isForeignBytes(body: unknown): boolean {
  return Object.prototype.toString.call(body) === '[object ArrayBuffer]'
}

export function tooLarge(maxBodyBytes: number): WebhookVerificationError {
  return new WebhookVerificationError(
    'body_too_large',
    `The body is larger than maxBodyBytes (${maxBodyBytes} bytes). Raise maxBodyBytes if deliveries this large are expected.`,
  )
}
