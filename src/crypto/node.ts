/**
 * HMAC-SHA256 on Node.js, Bun and Deno through node:crypto: chosen by the `#crypto` import
 * condition in package.json, never by sniffing at run time. The signed prefix and the body are
 * fed as two `update` calls so the body is never copied.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto'

export type SecretKey = KeyObject

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  return createSecretKey(Buffer.from(secret, 'utf8'))
}

/** HMAC-SHA256(key, prefix || body), as 32 bytes. */
export function hmac(key: SecretKey, prefix: string, body: Uint8Array): Uint8Array {
  return createHmac('sha256', key).update(prefix, 'latin1').update(body).digest()
}

/** Constant-time equality of two 32-byte digests. */
export function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && timingSafeEqual(a, b)
}

export const cryptoName = 'node:crypto'
