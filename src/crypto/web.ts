/**
 * Platform primitives through WebCrypto (`crypto.subtle`), for Cloudflare Workers
 * (workerd), the Next.js Edge runtime and browser-like runtimes: chosen by the `#crypto` import
 * condition in package.json. Keys are imported once per secret. WebCrypto needs the signed bytes
 * in one buffer, so the prefix and body are laid out in a buffer reused across calls: `sign`
 * copies its data before it returns its promise (the Web Cryptography API's sign() steps: "get a
 * copy of the bytes held by the data parameter"), so the buffer is free again, and zeroed, as
 * soon as the call returns. A fresh buffer per call (allocated, zero-filled, collected) was most
 * of what a 64 KiB delivery cost over a bare `verify` (docs/benchmarks.md).
 */

/** A secret being imported; `key` is set once the import has settled, so later calls skip a wait. */
export interface SecretKey {
  readonly promise: Promise<CryptoKey>
  key?: CryptoKey
}

const encoder = /* @__PURE__ */ new TextEncoder()
const decoder = /* @__PURE__ */ new TextDecoder('utf-8', { fatal: true })

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  const imported: SecretKey = {
    promise: crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']),
  }
  imported.promise.then(
    (key) => {
      imported.key = key
    },
    () => {}, // the rejection reaches the caller through `promise`
  )
  return imported
}

/** The signed bytes of the call in progress: grown as needed, zeroed after each call. */
let scratch: Uint8Array<ArrayBuffer> = new Uint8Array(1024)
/** The signature of the call in progress, as bytes (copied by `verify` as the data is). */
const expected = new Uint8Array(32)

/**
 * prefix || body laid out in `scratch`, for one WebCrypto call that copies it: the caller zeroes
 * it (`data.fill(0)`, in a `finally`) as soon as that call has returned or thrown, so the body does
 * not stay behind here. `prefix` is ASCII (id, timestamp, dots).
 */
function signedBytes(prefix: string, body: Uint8Array): Uint8Array<ArrayBuffer> {
  const length = prefix.length + body.byteLength
  if (scratch.byteLength < length) scratch = new Uint8Array(Math.max(length, scratch.byteLength * 2))
  for (let i = 0; i < prefix.length; i++) scratch[i] = prefix.charCodeAt(i)
  scratch.set(body, prefix.length)
  return scratch.subarray(0, length)
}

/** HMAC-SHA256(key, prefix || body) from `sign`, the signed bytes zeroed once it has copied them. */
function sign(key: CryptoKey, prefix: string, body: Uint8Array): Promise<ArrayBuffer> {
  const data = signedBytes(prefix, body)
  try {
    return crypto.subtle.sign('HMAC', key, data)
  } finally {
    data.fill(0)
  }
}

/** Two lowercase hex digits per byte value. */
const HEX = /* @__PURE__ */ Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))

/** HMAC-SHA256(key, prefix || body) as 64 lowercase hex digits. `prefix` is ASCII (id, timestamp, dots). */
export async function hmacHex(key: SecretKey, prefix: string, body: Uint8Array): Promise<string> {
  const cryptoKey = key.key ?? (await key.promise)
  const digest = new Uint8Array(await sign(cryptoKey, prefix, body))
  let hex = ''
  for (let i = 0; i < digest.byteLength; i++) hex += HEX[digest[i]!]
  return hex
}

/**
 * Whether HMAC-SHA256(key, prefix || body) is one of `signatures` (64 lowercase hex digits each),
 * compared in constant time: each value goes to `verify`, whose comparison is the platform's
 * constant-time one (OpenSSL's and BoringSSL's `CRYPTO_memcmp`), with no digest handed back to
 * JavaScript. Several values (only a header during a rotation holds more than one) are one
 * `verify` each. Not an async function: WebCrypto's own promise is returned as is, not wrapped in
 * another.
 */
export function hmacMatches(key: SecretKey, prefix: string, body: Uint8Array, signatures: readonly string[]): Promise<boolean> {
  if (key.key !== undefined) return matchKey(key.key, prefix, body, signatures)
  return key.promise.then((cryptoKey) => matchKey(cryptoKey, prefix, body, signatures))
}

function matchKey(key: CryptoKey, prefix: string, body: Uint8Array, signatures: readonly string[]): Promise<boolean> {
  // No closure per call on the path every delivery but a rotation's takes.
  if (signatures.length === 1) return verifyHex(key, prefix, body, signatures[0]!)
  return Promise.all(signatures.map((sent) => verifyHex(key, prefix, body, sent))).then((matched) => matched.includes(true))
}

/** `verify` of one value: `verify` copies the signature and the data before it returns, so both buffers are free again at once. */
function verifyHex(key: CryptoKey, prefix: string, body: Uint8Array, sent: string): Promise<boolean> {
  for (let i = 0; i < 32; i++) expected[i] = (hexDigit(sent.charCodeAt(2 * i)) << 4) | hexDigit(sent.charCodeAt(2 * i + 1))
  const data = signedBytes(prefix, body)
  try {
    return crypto.subtle.verify('HMAC', key, expected, data)
  } finally {
    data.fill(0)
  }
}

/** The value of a lowercase hex digit's character code (the header checks let only those through). */
function hexDigit(code: number): number {
  // '0'-'9' are 0x30-0x39 (low nibble 0-9), 'a'-'f' 0x61-0x66 (1-6, plus 9 from bit 6).
  return (code & 0xf) + 9 * (code >> 6)
}

/** Strict UTF-8 decoding (a leading BOM is dropped, an invalid sequence throws). */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes)
}
