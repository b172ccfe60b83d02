/**
 * Platform primitives on Node.js, Bun and Deno through node:crypto and node:buffer: chosen by the
 * `#crypto` import condition in package.json, never by sniffing at run time. HMAC-SHA256 runs
 * synchronously (the verifier then skips a promise per request).
 *
 * The HMAC of a body up to {@link ONE_SHOT_MAX_BODY} is RFC 2104 over two one-shot
 * `crypto.hash` calls, with the key's inner and outer pads computed once at import.
 * `createHmac` builds a stream object and has OpenSSL look the digest up on every call (about
 * 1.1 µs on Node 20, more than hashing a 400-byte delivery), and `digest()` into a Buffer adds
 * about 0.45 µs; the two one-shot hashes cost about 0.9 µs in all at 400 B. Larger bodies,
 * and runtimes without `crypto.hash` (Node < 20.12), stream through `createHmac`, which never
 * copies the body. Both paths are checked against the same known-answer vectors.
 */
import { Buffer, isUtf8 } from 'node:buffer'
import type { KeyObject } from 'node:crypto'
import { createRequire } from 'node:module'

/** A secret imported once: the key for `createHmac`, and the pads of the one-shot path. */
export interface SecretKey {
  readonly key: KeyObject
  /** The key XOR 0x36, one SHA-256 block. */
  readonly ipad: Buffer
  /** The key XOR 0x5c, one block, then room for the inner digest. */
  readonly outer: Buffer
}

const BLOCK = 64
/** Above this size, copying the body next to the pad costs more than the stream object saves. */
const ONE_SHOT_MAX_BODY = 32 * 1024

type NodeCrypto = typeof import('node:crypto')
type OneShotHash = (algorithm: string, data: Uint8Array, outputEncoding: 'latin1' | 'hex') => string

/**
 * node:crypto, loaded by the first secret rather than by the import: loading it takes about
 * 15 ms, more than everything else `import 'svc-webhooks'` does, and a process that never
 * verifies (a CLI command, a worker that only reads an inbox) should not pay it.
 */
let nodeCrypto: NodeCrypto | undefined
/** Set with `nodeCrypto`; a runtime without `hash` (Node < 20.12) streams every body. */
let oneShotHash: OneShotHash | undefined

function loadCrypto(): NodeCrypto {
  if (nodeCrypto) return nodeCrypto
  const builtin = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule
  // Node < 20.16 has no getBuiltinModule. A built-in resolves the same from any base path, and
  // `import.meta` would be a syntax error in the CommonJS build.
  const load = builtin ? (id: string) => builtin(id) : createRequire('/')
  nodeCrypto = load('node:crypto') as NodeCrypto
  oneShotHash = typeof nodeCrypto.hash === 'function' ? (nodeCrypto.hash as OneShotHash) : undefined
  return nodeCrypto
}

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  const crypto = loadCrypto()
  const bytes = Buffer.from(secret, 'utf8')
  const key = crypto.createSecretKey(bytes)
  // RFC 2104: a key longer than a block is hashed first.
  const block = bytes.byteLength > BLOCK ? crypto.createHash('sha256').update(bytes).digest() : bytes
  const ipad = Buffer.alloc(BLOCK, 0x36)
  const outer = Buffer.alloc(BLOCK + 32, 0x5c)
  for (let i = 0; i < block.byteLength; i++) {
    ipad[i]! ^= block[i]!
    outer[i]! ^= block[i]!
  }
  bytes.fill(0)
  block.fill(0)
  return { key, ipad, outer }
}

/** The inner hash's input, reused: the pad, the prefix and the body, laid out once per call. */
let scratch = Buffer.alloc(0)
/** The key whose inner pad `scratch` starts with. */
let padded: SecretKey | undefined

/**
 * HMAC-SHA256(key, prefix || body) as 64 lowercase hex digits. Synchronous here; a promise in
 * the WebCrypto build. `prefix` is ASCII (id, timestamp, dots) and is fed as Latin-1.
 */
export function hmacHex(key: SecretKey, prefix: string, body: Uint8Array): string {
  if (oneShotHash === undefined || body.byteLength > ONE_SHOT_MAX_BODY) return hmacHexStreamed(key, prefix, body)
  const length = BLOCK + prefix.length + body.byteLength
  if (scratch.byteLength < length) {
    scratch = Buffer.alloc(Math.max(length, 1024))
    padded = undefined
  }
  if (padded !== key) {
    scratch.set(key.ipad, 0)
    padded = key
  }
  scratch.write(prefix, BLOCK, 'latin1')
  scratch.set(body, BLOCK + prefix.length)
  // A plain view: cheaper to make than a Buffer's subarray.
  const inner = oneShotHash('sha256', new Uint8Array(scratch.buffer, scratch.byteOffset, length), 'latin1')
  // The body does not stay behind in a module-level buffer.
  scratch.fill(0, BLOCK, length)
  key.outer.write(inner, BLOCK, 'latin1')
  return oneShotHash('sha256', key.outer, 'hex')
}

/**
 * Whether HMAC-SHA256(key, prefix || body) is one of `signatures` (64 lowercase hex digits each),
 * compared in constant time: every one of the 64 characters is compared whatever the first
 * difference, and the result is read only at the end.
 */
export function hmacMatches(key: SecretKey, prefix: string, body: Uint8Array, signatures: readonly string[]): boolean {
  const digest = hmacHex(key, prefix, body)
  let found = false
  for (let j = 0; j < signatures.length; j++) {
    const sent = signatures[j]!
    let diff = 0
    for (let i = 0; i < 64; i++) diff |= sent.charCodeAt(i) ^ digest.charCodeAt(i)
    found ||= diff === 0
  }
  return found
}

/** The same HMAC through `createHmac`: two `update` calls, so the body is never copied. */
export function hmacHexStreamed(key: SecretKey, prefix: string, body: Uint8Array): string {
  return loadCrypto().createHmac('sha256', key.key).update(prefix, 'latin1').update(body).digest('hex')
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
