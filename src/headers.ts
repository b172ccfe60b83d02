/**
 * Reading a delivery's headers: the header names (spec/service-api.md §6.1), one lookup that
 * works on a Fetch `Headers` or a Node-style record, and every check that does not need the body
 * (id, timestamp format and window, signature presence and format, the v1-only refusal). The
 * request path runs these before it reads the body, so a stale or unsigned request never holds
 * a connection while its body trickles in; `verifyWebhook` and the CLI run the same code.
 * Each refusal's message says what was wrong with this request; what to do about it is the
 * answers table's fix (src/answer-texts.ts), added by what prints it (the log line, the CLI).
 */
import { WebhookVerificationError } from './errors.js'

export const HEADER_ID = 'svc-webhook-id'
export const HEADER_TIMESTAMP = 'svc-webhook-timestamp'
export const HEADER_SIGNATURE_V2 = 'svc-webhook-signature-v2'
export const HEADER_SIGNATURE_V1 = 'svc-webhook-signature'
export const HEADER_EVENT = 'svc-webhook-event'

/** Headers as a Fetch `Headers`, or a plain record as Node's `IncomingHttpHeaders` (any case). */
export type WebhookHeaders = Headers | { readonly [name: string]: string | readonly string[] | undefined }

/** One header's value: several values (a repeated header) come back as an array. */
export type HeaderValue = string | readonly string[] | undefined

/** Reads header `name` (lowercase) of `source`. Adapters pass their framework's own lookup. */
export type HeaderGetter<S> = (source: S, name: string) => HeaderValue

/**
 * Reads one header of a `Headers` or a record. Several values (a repeated header) come back as
 * an array so each caller decides: signatures may be joined, an id or timestamp may not.
 */
export function getHeader(headers: WebhookHeaders, name: string): HeaderValue {
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function') {
    return (headers as Headers).get(name) ?? undefined
  }
  const record = headers as Record<string, HeaderValue>
  const exact = record[name]
  if (exact !== undefined) return exact
  for (const key in record) {
    if (key.length === name.length && key.toLowerCase() === name) return record[key]
  }
  return undefined
}

/** What the headers say once they passed every check that does not need the body. */
export interface SignedHeaders {
  id: string
  /** The timestamp header's text as received: what was signed (a zero-padded value would not survive `Number()`). */
  timestampText: string
  timestamp: number
  version: 'v2' | 'v1'
  /** The well-formed values of that scheme, as 64 lowercase hex digits; empty when none is well formed. */
  signatures: string[]
}

/** The header rules, resolved from the options once. */
export interface HeaderRules {
  allowV1: boolean
  toleranceSeconds: number
  now: () => number
}

const MAX_ID_LENGTH = 256
const MAX_SIGNATURES = 16

/**
 * Every check that does not need the body, in the order the answers report them: id, timestamp
 * format, signature presence, the v1-only refusal, then the timestamp window. Throws a
 * {@link WebhookVerificationError}.
 */
export function readSignedHeaders<S>(source: S, get: HeaderGetter<S>, rules: HeaderRules): SignedHeaders {
  const id = single(get(source, HEADER_ID))
  if (id === undefined) throw missing('missing_id', HEADER_ID)
  if (!DELIVERY_ID.test(id)) throw new WebhookVerificationError('invalid_id', `The ${HEADER_ID} header is not one id of 1 to ${MAX_ID_LENGTH} visible ASCII characters.`)
  const timestampText = single(get(source, HEADER_TIMESTAMP))
  if (timestampText === undefined) throw missing('missing_timestamp', HEADER_TIMESTAMP)
  const timestamp = secondsOf(timestampText)
  if (timestamp < 0) throw new WebhookVerificationError('invalid_timestamp', `The ${HEADER_TIMESTAMP} header is not decimal Unix seconds.`)
  let header = get(source, HEADER_SIGNATURE_V2)
  let version: 'v2' | 'v1' = 'v2'
  if (header === undefined || header === '') {
    // The legacy header is only read when v2 is absent: one lookup fewer on every v2 delivery.
    header = get(source, HEADER_SIGNATURE_V1)
    if (header === undefined || header === '') throw missing('missing_signature', HEADER_SIGNATURE_V2)
    version = 'v1'
  }
  const signatures = parseSignatures(header, version)
  if (version === 'v1' && !rules.allowV1) {
    throw new WebhookVerificationError('v1_not_allowed', `Only the legacy v1 signature (${HEADER_SIGNATURE_V1}), and allowV1 is off.`)
  }
  const { toleranceSeconds } = rules
  const skew = Math.floor(rules.now() / 1000) - timestamp
  if (skew > toleranceSeconds || -skew > toleranceSeconds) {
    throw new WebhookVerificationError(
      skew > 0 ? 'timestamp_too_old' : 'timestamp_in_future',
      `The signed timestamp is ${Math.abs(skew)} s ${skew > 0 ? 'old' : 'ahead'}, over the ${toleranceSeconds} s tolerance.`,
    )
  }
  return { id, timestampText, timestamp, version, signatures }
}

const missing = (code: 'missing_id' | 'missing_timestamp' | 'missing_signature', name: string) => new WebhookVerificationError(code, `The ${name} header is missing.`)

/** A header sent once, as a string; a repeated one joined so the checks below refuse it. */
function single(value: HeaderValue): string | undefined {
  if (value === undefined || typeof value === 'string') return value
  return value.length === 1 ? value[0] : value.join(', ')
}

/** One delivery id: 1 to 256 visible ASCII characters (a regular expression beats a loop here). */
export const DELIVERY_ID = new RegExp(`^[\\x21-\\x7e]{1,${MAX_ID_LENGTH}}$`)

/**
 * 1 to 10 decimal digits as a number (the year 2286 at most: anything longer is absurd, DESIGN.md
 * rule 4), or -1. A loop: half the cost of a regular expression and `Number()`.
 */
function secondsOf(text: string): number {
  if (text.length === 0 || text.length > 10) return -1
  let seconds = 0
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 0x30
    if (digit < 0 || digit > 9) return -1
    seconds = seconds * 10 + digit
  }
  return seconds
}

/** Values of a signature header: `v2=<hex>` entries separated by spaces or commas (DESIGN.md rule 7). */
function parseSignatures(header: string | readonly string[], version: 'v2' | 'v1'): string[] {
  const scheme = version === 'v2' ? 'v2=' : 'v1='
  const text = typeof header === 'string' ? header : header.join(',')
  // The common case, one value: no scan for separators.
  if (text.length === 67) {
    const value = text.startsWith(scheme) ? hexValue(text.slice(3)) : undefined
    return value === undefined ? [] : [value]
  }
  const found: string[] = []
  let start = 0
  while (start < text.length && found.length < MAX_SIGNATURES) {
    let end = start
    while (end < text.length && text.charCodeAt(end) !== 0x20 && text.charCodeAt(end) !== 0x2c) end++
    const value = end - start === 67 && text.startsWith(scheme, start) ? hexValue(text.slice(start + 3, end)) : undefined
    if (value !== undefined) found.push(value)
    start = end + 1
  }
  return found
}

const LOWERCASE_HEX = /^[0-9a-f]{64}$/
const ANY_CASE_HEX = /^[0-9a-fA-F]{64}$/

/**
 * 64 hex digits as the digest is written (lowercase), or undefined when they are not hex. The
 * service sends lowercase; uppercase digits are the same value.
 */
function hexValue(value: string): string | undefined {
  if (LOWERCASE_HEX.test(value)) return value
  return ANY_CASE_HEX.test(value) ? value.toLowerCase() : undefined
}

/**
 * Refuses a signature header that holds no well-formed value before the body is read: no body
 * can make it match, so there is no reason to wait for one.
 */
export function requireWellFormed(signed: SignedHeaders): void {
  if (signed.signatures.length === 0) {
    throw new WebhookVerificationError('invalid_signature', `The ${signed.version} signature header holds no "${signed.version}=<64 hex digits>" value.`)
  }
}
