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

/** HMAC-SHA256(key, prefix || body), as 32 bytes. `prefix` is ASCII (id, timestamp, dots). */
export async function hmac(key: SecretKey, prefix: string, body: Uint8Array): Promise<Uint8Array> {
  const data = new Uint8Array(prefix.length + body.byteLength)
  for (let i = 0; i < prefix.length; i++) data[i] = prefix.charCodeAt(i)
  data.set(body, prefix.length)
  return new Uint8Array(await crypto.subtle.sign('HMAC', key.key ?? (await key.promise), data))
}

/** Constant-time equality: every byte is visited whatever the first difference. */
export function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false
  let diff = 0
  for (let i = 0; i < a.byteLength; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  if (c >= 0x61 && c <= 0x66) return c - 0x57
  if (c >= 0x41 && c <= 0x46) return c - 0x37
  return -1
}

/** 64 hex digits at `offset` of `text` as 32 bytes, or undefined when any of them is not hex. */
export function decodeHex(text: string, offset: number): Uint8Array | undefined {
  const bytes = new Uint8Array(32)
  for (let i = 0; i < 32; i++) {
    const hi = hexValue(text.charCodeAt(offset + 2 * i))
    const lo = hexValue(text.charCodeAt(offset + 2 * i + 1))
    if (hi < 0 || lo < 0) return undefined
    bytes[i] = (hi << 4) | lo
  }
  return bytes
}

/** Strict UTF-8 decoding (a leading BOM is dropped, an invalid sequence throws). */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes)
}


