/**
 * What a delivery looks like to the core: raw body bytes and headers, in whichever form the
 * framework has them. Reading a header and turning the body into bytes live here.
 */
import { WebhookVerificationError } from './errors.js'

/** Headers as a Fetch `Headers`, or a plain record as Node's `IncomingHttpHeaders` (any case). */
export type WebhookHeaders = Headers | { readonly [name: string]: string | readonly string[] | undefined }

/** A delivery as received: the raw body exactly as sent, and the request headers. */
export interface WebhookInput {
  /** The raw body. A string must be the UTF-8 text as received, never re-serialized JSON. */
  body: Uint8Array | ArrayBuffer | string
  headers: WebhookHeaders
}

export const HEADER_ID = 'svc-webhook-id'
export const HEADER_TIMESTAMP = 'svc-webhook-timestamp'
export const HEADER_SIGNATURE_V2 = 'svc-webhook-signature-v2'
export const HEADER_SIGNATURE_V1 = 'svc-webhook-signature'
export const HEADER_EVENT = 'svc-webhook-event'

const encoder = new TextEncoder()

/**
 * Reads one header. Several values (a repeated header) come back as an array so each caller
 * decides: signatures may be joined, an id or timestamp may not.
 */
export function getHeader(headers: WebhookHeaders, name: string): string | readonly string[] | undefined {
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function') {
    return (headers as Headers).get(name) ?? undefined
  }
  const record = headers as Record<string, string | readonly string[] | undefined>
  const exact = record[name]
  if (exact !== undefined) return exact
  for (const key in record) {
    if (key.length === name.length && key.toLowerCase() === name) return record[key]
  }
  return undefined
}

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
