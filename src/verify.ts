/**
 * Signature verification (spec/service-api.md §6.2, DESIGN.md "Verification rules" 1-8): raw
 * bytes, strict timestamp in a window both ways, v2 required unless v1 is opted in, several
 * secrets and several `v2=` values, constant-time comparison, event type from the signed body.
 */
import { allocBytes, decodeUtf8, equal, hmac } from '#crypto'
import { WebhookVerificationError } from './errors.js'
import type { WebhookEvent } from './events.js'
import {
  getHeader,
  HEADER_ID,
  HEADER_SIGNATURE_V1,
  HEADER_SIGNATURE_V2,
  HEADER_TIMESTAMP,
  toBytes,
  type WebhookInput,
} from './input.js'
import { resolveVerifyOptions, SECRET_PREFIX, type ResolvedVerifyOptions, type VerifyOptions } from './options.js'

/** A delivery whose signature and timestamp were verified; the body is not parsed yet. */
export interface VerifiedSignature {
  /** `svc-webhook-id`: stable across retries and resends (spec §6.1). Covered by v2 only. */
  id: string
  /** `svc-webhook-timestamp`, in Unix seconds: fresh on every attempt. */
  timestamp: number
  /** Which scheme verified the delivery. `'v1'` only when `allowV1` is on. */
  signatureVersion: 'v2' | 'v1'
  /** Index in `secret` (when it is an array) of the secret that matched. */
  secretIndex: number
  /** The body exactly as received. */
  rawBody: Uint8Array
}

/** A verified delivery with its parsed, typed event. */
export interface VerifiedDelivery<E = WebhookEvent> extends VerifiedSignature {
  /** The parsed body; its `event` field (not the unsigned `svc-webhook-event` header) names the type. */
  event: E
}

const MAX_ID_LENGTH = 256
const MAX_TIMESTAMP_DIGITS = 10 // up to the year 2286: anything longer is absurd (DESIGN.md rule 4)
const MAX_SIGNATURES = 16

/**
 * Verifies a delivery's signature and timestamp over its raw bytes and parses its event.
 * Throws a {@link WebhookVerificationError} (with `code` and `status`) when the delivery is refused.
 *
 * @example
 * const delivery = await verifyWebhook({ body: rawBytes, headers: request.headers }, {
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 * })
 * if (isEventType(delivery.event, 'message.received')) console.log(delivery.event.message.text)
 */
export function verifyWebhook(input: WebhookInput, options: VerifyOptions): Promise<VerifiedDelivery> {
  return settle(input, options, true) as Promise<VerifiedDelivery>
}

/**
 * The signature and timestamp checks of {@link verifyWebhook} without parsing the body: for
 * callers that parse it themselves or forward the bytes.
 *
 * @example
 * const { id, rawBody } = await verifySignature({ body, headers }, { secret })
 */
export function verifySignature(input: WebhookInput, options: VerifyOptions): Promise<VerifiedSignature> {
  return settle(input, options, false)
}

/**
 * Not `async`: with node:crypto the whole check is synchronous, and an async function (or an
 * await on a plain value) costs more than all the header checks together (issue 5).
 * `Promise.resolve` hands a WebCrypto promise back as is.
 */
function settle(input: WebhookInput, options: VerifyOptions, parse: boolean): Promise<VerifiedSignature> {
  try {
    return Promise.resolve(verifyNow(input, options, parse))
  } catch (error) {
    return Promise.reject(error)
  }
}

/** What is known once the headers passed: everything the HMAC loop and the answer need. */
interface Signed {
  opts: ResolvedVerifyOptions
  id: string
  timestamp: number
  version: 'v2' | 'v1'
  prefix: string
  body: Uint8Array
  signatures: Uint8Array[]
  parse: boolean
}

/**
 * The checks, synchronous up to the HMAC; a promise only when the crypto build's HMAC is one
 * (WebCrypto). The body is parsed (when `parse`) only once a signature matched.
 */
function verifyNow(input: WebhookInput, options: VerifyOptions, parse: boolean): VerifiedSignature | Promise<VerifiedSignature> {
  const opts = resolveVerifyOptions(options)
  if (typeof input !== 'object' || input === null) {
    throw new WebhookVerificationError('body_already_parsed', 'verifyWebhook takes { body, headers }.')
  }
  const body = toBytes(input.body, opts.maxBodyBytes)
  const headers = input.headers ?? {}
  const id = readId(getHeader(headers, HEADER_ID))
  const timestampText = readTimestamp(getHeader(headers, HEADER_TIMESTAMP))
  const timestamp = Number(timestampText)

  const v2Header = getHeader(headers, HEADER_SIGNATURE_V2)
  let version: 'v2' | 'v1'
  let signatures: Uint8Array[]
  if (v2Header !== undefined && v2Header !== '') {
    version = 'v2'
    signatures = parseSignatures(v2Header, 'v2=')
  } else {
    // The legacy header is only read when v2 is absent: one lookup fewer on every v2 delivery.
    const v1Header = getHeader(headers, HEADER_SIGNATURE_V1)
    if (v1Header === undefined || v1Header === '') {
      throw new WebhookVerificationError(
        'missing_signature',
        `No ${HEADER_SIGNATURE_V2} header. Is this request from the service, and does a proxy forward all svc-webhook-* headers?`,
      )
    }
    signatures = parseSignatures(v1Header, 'v1=')
    if (!opts.allowV1) {
      throw new WebhookVerificationError(
        'v1_not_allowed',
        `The delivery carries only the legacy v1 signature (${HEADER_SIGNATURE_V1}). The service sends v2 on every delivery; ` +
          'check that a proxy forwards svc-webhook-signature-v2, or set allowV1: true for a legacy sender.',
      )
    }
    version = 'v1'
  }

  checkTimestamp(timestamp, opts)

  // The header text as received is what was signed (a zero-padded value would not survive Number()).
  const prefix = version === 'v2' ? `${id}.${timestampText}.` : `${timestampText}.`
  const { keys } = opts
  for (let i = 0; signatures.length > 0 && i < keys.length; i++) {
    // Typed against node:crypto (tsconfig paths), which answers at once; WebCrypto returns a promise.
    const digest = hmac(keys[i]!, prefix, body) as Uint8Array | Promise<Uint8Array>
    if (digest instanceof Promise) {
      return matchLater({ opts, id, timestamp, version, prefix, body, signatures, parse }, i, digest)
    }
    if (matches(signatures, digest)) return verified(id, timestamp, version, i, body, parse)
  }
  throw invalidSignature(signatures.length, version, opts)
}

/** The rest of the secrets loop when the HMAC is a promise (WebCrypto), from secret `index`. */
async function matchLater(signed: Signed, index: number, pending: Promise<Uint8Array>): Promise<VerifiedSignature> {
  const { opts, prefix, body, signatures } = signed
  for (let i = index; i < opts.keys.length; i++) {
    const digest = i === index ? await pending : await hmac(opts.keys[i]!, prefix, body)
    if (matches(signatures, digest)) return verified(signed.id, signed.timestamp, signed.version, i, body, signed.parse)
  }
  throw invalidSignature(signatures.length, signed.version, opts)
}

function matches(signatures: Uint8Array[], digest: Uint8Array): boolean {
  for (let j = 0; j < signatures.length; j++) {
    if (equal(digest, signatures[j]!)) return true
  }
  return false
}

/** The answer, built once: with the parsed event for `verifyWebhook`, without for `verifySignature`. */
function verified(
  id: string,
  timestamp: number,
  signatureVersion: 'v2' | 'v1',
  secretIndex: number,
  rawBody: Uint8Array,
  parse: boolean,
): VerifiedSignature | VerifiedDelivery {
  if (!parse) return { id, timestamp, signatureVersion, secretIndex, rawBody }
  return { id, timestamp, signatureVersion, secretIndex, rawBody, event: parseEvent(rawBody) }
}

function invalidSignature(count: number, version: 'v2' | 'v1', opts: ResolvedVerifyOptions): WebhookVerificationError {
  return new WebhookVerificationError('invalid_signature', signatureHint(count, version, opts))
}

function signatureHint(count: number, version: 'v2' | 'v1', opts: ResolvedVerifyOptions): string {
  if (count === 0) {
    return `The ${version} signature header holds no "${version}=<64 hex digits>" value.`
  }
  let message =
    `No ${version} signature matched the ${opts.secrets.length === 1 ? 'configured secret' : `${opts.secrets.length} configured secrets`}. ` +
    'Check that the secret is the current one for this endpoint (rotating it stops the old one at once; ' +
    'list both while you deploy) and that the body is the raw bytes as received, not JSON parsed and re-serialized.'
  if (opts.unprefixedSecret) {
    message += ` A configured secret does not start with "${SECRET_PREFIX}": use the whole value the service returned, prefix included.`
  }
  return message
}

function single(value: string | readonly string[] | undefined): string | undefined {
  if (value === undefined || typeof value === 'string') return value
  return value.length === 1 ? value[0] : value.join(', ')
}

function readId(raw: string | readonly string[] | undefined): string {
  const id = single(raw)
  if (id === undefined) {
    throw new WebhookVerificationError('missing_id', `The ${HEADER_ID} header is missing.`)
  }
  let valid = id.length > 0 && id.length <= MAX_ID_LENGTH
  for (let i = 0; valid && i < id.length; i++) {
    const c = id.charCodeAt(i)
    valid = c > 0x20 && c < 0x7f
  }
  if (!valid) {
    throw new WebhookVerificationError(
      'invalid_id',
      `The ${HEADER_ID} header must be one delivery id of 1 to ${MAX_ID_LENGTH} visible ASCII characters.`,
    )
  }
  return id
}

function readTimestamp(raw: string | readonly string[] | undefined): string {
  const value = single(raw)
  if (value === undefined) {
    throw new WebhookVerificationError('missing_timestamp', `The ${HEADER_TIMESTAMP} header is missing.`)
  }
  let valid = value.length > 0 && value.length <= MAX_TIMESTAMP_DIGITS
  for (let i = 0; valid && i < value.length; i++) {
    const c = value.charCodeAt(i)
    valid = c >= 0x30 && c <= 0x39
  }
  if (!valid) {
    throw new WebhookVerificationError(
      'invalid_timestamp',
      `The ${HEADER_TIMESTAMP} header must be Unix time in whole seconds (decimal digits only).`,
    )
  }
  return value
}

function checkTimestamp(timestamp: number, opts: ResolvedVerifyOptions): void {
  const skew = Math.floor(opts.now() / 1000) - timestamp
  if (skew > opts.toleranceSeconds) {
    throw new WebhookVerificationError(
      'timestamp_too_old',
      `The signed timestamp is ${skew} s old, more than the ${opts.toleranceSeconds} s tolerance. ` +
        'A replay, or a clock that is off: check NTP on this host.',
    )
  }
  if (-skew > opts.toleranceSeconds) {
    throw new WebhookVerificationError(
      'timestamp_in_future',
      `The signed timestamp is ${-skew} s in the future, more than the ${opts.toleranceSeconds} s tolerance. Check NTP on this host.`,
    )
  }
}

/** Values of a signature header: `v2=<hex>` entries separated by spaces or commas (DESIGN.md rule 7). */
function parseSignatures(header: string | readonly string[], scheme: 'v2=' | 'v1='): Uint8Array[] {
  const text = typeof header === 'string' ? header : header.join(',')
  const found: Uint8Array[] = []
  let start = 0
  while (start < text.length && found.length < MAX_SIGNATURES) {
    let end = start
    while (end < text.length && text.charCodeAt(end) !== 0x20 && text.charCodeAt(end) !== 0x2c) end++
    if (end - start === 67 && text.startsWith(scheme, start)) {
      const bytes = decodeHex(text, start + 3)
      if (bytes) found.push(bytes)
    }
    start = end + 1
  }
  return found
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  if (c >= 0x61 && c <= 0x66) return c - 0x57
  if (c >= 0x41 && c <= 0x46) return c - 0x37
  return -1
}

/** 64 hex digits at `offset` to 32 bytes, or undefined when any digit is not hex. */
function decodeHex(text: string, offset: number): Uint8Array | undefined {
  const bytes = allocBytes(32) // from Node's pool: a `new Uint8Array` costs its own backing store
  for (let i = 0; i < 32; i++) {
    const hi = hexValue(text.charCodeAt(offset + 2 * i))
    const lo = hexValue(text.charCodeAt(offset + 2 * i + 1))
    if (hi < 0 || lo < 0) return undefined
    bytes[i] = (hi << 4) | lo
  }
  return bytes
}

/** Parses a verified body: UTF-8 JSON, an object with a string `event`. */
export function parseEvent(rawBody: Uint8Array): WebhookEvent {
  let event: unknown
  try {
    event = JSON.parse(decodeUtf8(rawBody))
  } catch {
    // No `cause`: the parser's message quotes the body, and a body never goes into an error.
    throw new WebhookVerificationError('invalid_json', 'The verified body is not UTF-8 JSON.')
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event) || typeof (event as { event?: unknown }).event !== 'string') {
    throw new WebhookVerificationError('invalid_json', 'The verified body is not a JSON object with a string "event" field.')
  }
  return event as WebhookEvent
}
