/**
 * Platform primitives through WebCrypto (`crypto.subtle`), for Cloudflare Workers
 * (workerd), the Next.js Edge runtime and browser-like runtimes: chosen by the `#crypto` import
 * condition in package.json. Keys are imported once per secret; WebCrypto needs the signed bytes
 * in one buffer, so the prefix and body are joined here (the one copy this path cannot avoid).
 */

/** A secret being imported; `key` is set once the import has settled, so later calls skip a wait. */
export interface SecretKey {
  readonly promise: Promise<CryptoKey>
  key?: CryptoKey
}

const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { fatal: true })

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  const imported: SecretKey = {
    promise: crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']),
  }
  imported.promise.then(
    (key) => {
      imported.key = key
    },
    () => {}, // the rejection reaches the caller through `promise`
  )
  return imported
}

/** Two lowercase hex digits per byte value. */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))

/** HMAC-SHA256(key, prefix || body) as 64 lowercase hex digits. `prefix` is ASCII (id, timestamp, dots). */
export async function hmacHex(key: SecretKey, prefix: string, body: Uint8Array): Promise<string> {
  const data = new Uint8Array(prefix.length + body.byteLength)
  for (let i = 0; i < prefix.length; i++) data[i] = prefix.charCodeAt(i)
  data.set(body, prefix.length)
  const digest = new Uint8Array(await crypto.subtle.sign('HMAC', key.key ?? (await key.promise), data))
  let hex = ''
  for (let i = 0; i < digest.byteLength; i++) hex += HEX[digest[i]!]
  return hex
}

/** Strict UTF-8 decoding (a leading BOM is dropped, an invalid sequence throws). */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes)
}


