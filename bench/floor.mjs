/**
 * The floor of verifying one delivery: what any receiver must compute, in the cheapest way known,
 * written here independently of the package so the benchmarks compare against code that is not
 * theirs. HMAC-SHA256 (RFC 2104) as two one-shot `crypto.hash` calls with the key's pads made
 * once, then a constant-time comparison with the header's hex. On Node 20 this costs about half
 * of `createHmac(...).digest()` plus `timingSafeEqual` on a 400-byte delivery, which the verify
 * benchmark keeps as a second floor, the way receivers usually write it.
 */
import { Buffer } from 'node:buffer'
import { createHmac, createSecretKey, hash, timingSafeEqual } from 'node:crypto'

/**
 * The floor's check for one secret: `(prefix, body, header) => boolean`, where `prefix` is
 * `<id>.<timestamp>.` and `header` the `v2=<hex>` value. Bodies of up to 64 KiB.
 */
export function hmacFloor(secret) {
  const key = Buffer.from(secret, 'utf8')
  if (key.length > 64) throw new Error('bench: a floor key longer than a block is not needed here')
  const inner = Buffer.alloc(64 + 1024 + 64 * 1024, 0)
  const outer = Buffer.alloc(96, 0x5c)
  for (let i = 0; i < 64; i++) inner[i] = 0x36 ^ (key[i] ?? 0)
  for (let i = 0; i < key.length; i++) outer[i] ^= key[i]
  return (prefix, body, header) => {
    const start = 64 + inner.write(prefix, 64, 'latin1')
    inner.set(body, start)
    outer.write(hash('sha256', new Uint8Array(inner.buffer, inner.byteOffset, start + body.byteLength), 'latin1'), 64, 'latin1')
    const digest = hash('sha256', outer, 'hex')
    let diff = header.length ^ 67
    for (let i = 0; i < 64; i++) diff |= digest.charCodeAt(i) ^ header.charCodeAt(i + 3)
    return diff === 0
  }
}

/** The same check as receivers usually write it: `createHmac`, `digest()`, `timingSafeEqual`. */
export function createHmacFloor(secret) {
  const key = createSecretKey(Buffer.from(secret, 'utf8'))
  return (prefix, body, header) => {
    const expected = Buffer.from(header.slice(3), 'hex')
    const digest = createHmac('sha256', key).update(prefix, 'latin1').update(body).digest()
    return expected.length === 32 && timingSafeEqual(digest, expected)
  }
}

/**
 * The WebCrypto floor a receiver can reach: what a careful receiver on `crypto.subtle` writes,
 * for a key imported once. WebCrypto's HMAC takes one buffer and cannot be fed in parts, so
 * `id.timestamp.` and the body are joined into one `Uint8Array` (`reuse: true`: one buffer kept
 * across calls, as the package does; otherwise a new one per call), the header's hex is decoded
 * into 32 bytes, and `subtle.verify` compares (the platform's constant-time comparison). Returns
 * `(prefix, body, header) => Promise<boolean>`; `prefix` is ASCII.
 */
export function subtleFloor(key, { reuse = false } = {}) {
  const joined = new Uint8Array(reuse ? 1024 + 64 * 1024 : 0)
  return (prefix, body, header) => {
    const signature = new Uint8Array(32)
    let bad = header.length ^ 67
    for (let i = 0; i < 32; i++) {
      const hi = hexValue(header.charCodeAt(3 + 2 * i))
      const lo = hexValue(header.charCodeAt(4 + 2 * i))
      bad |= (hi | lo) >> 4
      signature[i] = (hi << 4) | lo
    }
    if (bad !== 0) return Promise.resolve(false)
    const length = prefix.length + body.byteLength
    const data = reuse ? joined.subarray(0, length) : new Uint8Array(length)
    for (let i = 0; i < prefix.length; i++) data[i] = prefix.charCodeAt(i)
    data.set(body, prefix.length)
    return crypto.subtle.verify('HMAC', key, signature, data)
  }
}

/** A lowercase hex digit's value, or 16 and above for any other character code. */
function hexValue(code) {
  if (code >= 0x30 && code <= 0x39) return code - 0x30
  if (code >= 0x61 && code <= 0x66) return code - 0x57
  return 16
}
