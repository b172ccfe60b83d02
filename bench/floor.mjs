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
