/**
 * HMAC-SHA256 through WebCrypto (`crypto.subtle`), for Cloudflare Workers (workerd), the Next.js
 * Edge runtime and browsers-like runtimes: chosen by the `#crypto` import condition in
 * package.json. Keys are imported once per secret; WebCrypto needs the signed bytes in one
 * buffer, so the prefix and body are joined here (the one copy this path cannot avoid).
 */

export type SecretKey = Promise<CryptoKey>

const encoder = new TextEncoder()

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])
}

/** HMAC-SHA256(key, prefix || body), as 32 bytes. `prefix` is ASCII (id, timestamp, dots). */
export async function hmac(key: SecretKey, prefix: string, body: Uint8Array): Promise<Uint8Array> {
  const data = new Uint8Array(prefix.length + body.byteLength)
  for (let i = 0; i < prefix.length; i++) data[i] = prefix.charCodeAt(i)
  data.set(body, prefix.length)
  return new Uint8Array(await crypto.subtle.sign('HMAC', await key, data))
}

/** Constant-time equality: every byte is visited whatever the first difference. */
export function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false
  let diff = 0
  for (let i = 0; i < a.byteLength; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}

export const cryptoName = 'WebCrypto'
