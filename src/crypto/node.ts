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
 *
 * The module imports nothing: node:buffer and node:crypto come from `process.getBuiltinModule`
 * (Node >= 20.16, Bun, Deno >= 2.1) when first needed. Static imports of node:buffer and
 * node:module cost `import 'svc-webhooks'` about 0.6 ms, an ES module wrapper built for each, a
 * twentieth of its time (`node scripts/import-cost.mjs`). A runtime without getBuiltinModule
 * loads both by dynamic import at the first secret, and the calls made before they arrive answer
 * with a promise, as the WebCrypto build's always do.
 */
import type { Buffer } from 'node:buffer'
import type { KeyObject } from 'node:crypto'

/** A secret imported once: the key for `createHmac`, and the pads of the one-shot path. */
export interface SecretKey {
  key: KeyObject
  /** The key XOR 0x36, one SHA-256 block. */
  ipad: Buffer
  /** The key XOR 0x5c, one block, then room for the inner digest. */
  outer: Buffer
  /** Set while the built-ins are still loading (a runtime without getBuiltinModule): the key is filled in when it settles. */
  pending?: Promise<void>
}

const BLOCK = 64
/** Above this size, copying the body next to the pad costs more than the stream object saves. */
const ONE_SHOT_MAX_BODY = 32 * 1024

type NodeCrypto = typeof import('node:crypto')
type NodeBuffer = typeof import('node:buffer')
type GetBuiltin = (id: string) => unknown
type OneShotHash = (algorithm: string, data: Uint8Array, outputEncoding: 'latin1' | 'hex') => string

/** process.getBuiltinModule, where the runtime has it. */
const getBuiltin = (globalThis as { process?: { getBuiltinModule?: GetBuiltin } }).process?.getBuiltinModule

/**
 * node:crypto, loaded by the first secret rather than by the import: loading it takes about
 * 15 ms, more than everything else `import 'svc-webhooks'` does, and a process that never
 * verifies (a CLI command, a worker that only reads an inbox) should not pay it.
 */
let nodeCrypto: NodeCrypto | undefined
/** Set with `nodeCrypto`, or before it by {@link decodeUtf8}. */
let nodeBuffer: NodeBuffer | undefined
/** Set with `nodeCrypto`; a runtime without `hash` (Node < 20.12) streams every body. */
let oneShotHash: OneShotHash | undefined
/** The dynamic import of both, on a runtime without getBuiltinModule. */
let loading: Promise<void> | undefined
/** The strict UTF-8 decoder of a runtime without getBuiltinModule, made at its first use. */
let strict: TextDecoder | undefined

function loaded(buffer: NodeBuffer, crypto: NodeCrypto): void {
  nodeBuffer = buffer
  nodeCrypto = crypto
  oneShotHash = typeof crypto.hash === 'function' ? (crypto.hash as OneShotHash) : undefined
}

/** node:crypto now, or the promise of it on a runtime without getBuiltinModule (then loading, once). */
function loadCrypto(): NodeCrypto | Promise<void> {
  if (nodeCrypto) return nodeCrypto
  if (getBuiltin) {
    loaded(getBuiltin('node:buffer') as NodeBuffer, getBuiltin('node:crypto') as NodeCrypto)
    return nodeCrypto!
  }
  return (loading ??= Promise.all([import('node:buffer'), import('node:crypto')]).then(([buffer, crypto]) => loaded(buffer, crypto)))
}

/** node:buffer, once {@link loadCrypto} has loaded it (every caller holds a key imported by then). */
const buffers = (): typeof Buffer => nodeBuffer!.Buffer

/** Imports a secret once; the result is cached by the caller for the life of the options. */
export function importSecret(secret: string): SecretKey {
  const crypto = loadCrypto()
  if (crypto instanceof Promise) {
    // Filled in when the built-ins arrive; until then each call waits for `pending`.
    const key = { pending: crypto.then(() => void Object.assign(key, importSecret(secret), { pending: undefined })) } as SecretKey
    // A failed load reaches the callers through `pending`; unawaited, it is no unhandled rejection.
    key.pending!.catch(() => {})
    return key
  }
  const Buffer = buffers()
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
let scratch: Buffer | undefined
/** The key whose inner pad `scratch` starts with. */
let padded: SecretKey | undefined

/**
 * HMAC-SHA256(key, prefix || body) as 64 lowercase hex digits. Synchronous here; a promise in
 * the WebCrypto build. `prefix` is ASCII (id, timestamp, dots) and is fed as Latin-1.
 */
export function hmacHex(key: SecretKey, prefix: string, body: Uint8Array): string | Promise<string> {
  if (key.pending) return key.pending.then(() => hmacHex(key, prefix, body))
  if (oneShotHash === undefined || body.byteLength > ONE_SHOT_MAX_BODY) return hmacHexStreamed(key, prefix, body)
  const length = BLOCK + prefix.length + body.byteLength
  if (scratch === undefined || scratch.byteLength < length) {
    scratch = buffers().alloc(Math.max(length, 1024))
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
export function hmacMatches(key: SecretKey, prefix: string, body: Uint8Array, signatures: readonly string[]): boolean | Promise<boolean> {
  const digest = hmacHex(key, prefix, body)
  return typeof digest === 'string' ? matches(digest, signatures) : digest.then((hex) => matches(hex, signatures))
}

function matches(digest: string, signatures: readonly string[]): boolean {
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
  return nodeCrypto!.createHmac('sha256', key.key).update(prefix, 'latin1').update(body).digest('hex')
}

/**
 * Strict UTF-8 decoding with TextDecoder's `fatal: true` semantics (a leading BOM is dropped, an
 * invalid sequence throws), about 20 % faster on large non-ASCII bodies: simdutf validation,
 * then V8's decoder, without copying the bytes.
 */
export function decodeUtf8(bytes: Uint8Array): string {
  const built = (nodeBuffer ??= getBuiltin?.('node:buffer') as NodeBuffer | undefined)
  // A runtime without getBuiltinModule, before the first secret: TextDecoder's own strict decoding.
  if (built === undefined) return (strict ??= new TextDecoder('utf-8', { fatal: true })).decode(bytes)
  const { Buffer, isUtf8 } = built
  if (!isUtf8(bytes)) throw new TypeError('The bytes are not valid UTF-8.')
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const bom = buffer.byteLength >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  return buffer.toString('utf8', bom)
}
