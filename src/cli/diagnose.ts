/**
 * The diagnosis behind `verify`: the core's own verdict (`verifyWebhook` and its error codes),
 * then each rule checked on its own, then probes that name the cause of a signature mismatch:
 * the v1 signature matching, the secret with or without its prefix or trimmed, and the body as
 * it was before someone parsed and re-serialized it. Nothing here prints the secret, an expected
 * signature or the body.
 */
import { isWebhookVerificationError, type WebhookErrorCode } from '../errors.js'
import { getHeader, HEADER_ID, HEADER_SIGNATURE_V1, HEADER_SIGNATURE_V2, HEADER_TIMESTAMP, readSignedHeaders, type HeaderValue, type SignedHeaders } from '../headers.js'
import { DEFAULT_TOLERANCE_SECONDS, SECRET_PREFIX } from '../options.js'
import { serializeEvent } from '../signing.js'
import { verifySignature, verifyWebhook } from '../verify.js'
import type { CapturedHeaders } from './capture.js'
import { FIXES, RAW_BYTES, SAME_SECRET } from './fixes.js'

export interface DiagnoseOptions {
  secret: string
  /** Where the secret came from, e.g. `$SVC_WEBHOOK_SECRET` (printed; the value never is). */
  secretSource: string
  toleranceSeconds?: number
  allowV1?: boolean
  /** The time to check against, in Unix seconds. @default now */
  nowSeconds?: number
  /** The path the request was sent to (a raw capture's request line): on a receiver of many endpoints, it names the endpoint. */
  target?: string
}

export interface Check {
  rule: string
  ok: boolean
  detail: string
  /** Not checked: a rule it builds on failed (the detail names it). */
  notRun?: true
}

export interface Finding {
  /** A short name of the cause, e.g. `wrong secret`. */
  cause: string
  why: string
  fix: string
}

export interface Diagnosis {
  ok: boolean
  /** The core's refusal code, when refused. */
  code?: WebhookErrorCode | 'invalid_secret'
  status?: number
  id?: string
  eventType?: string
  signatureVersion?: 'v2' | 'v1'
  checks: Check[]
  findings: Finding[]
}

const REQUIRED = [HEADER_ID, HEADER_TIMESTAMP, HEADER_SIGNATURE_V2, HEADER_SIGNATURE_V1] as const
const decoder = new TextDecoder()
const encoder = new TextEncoder()

/** Diagnoses one captured delivery. */
export async function diagnose(headers: CapturedHeaders, body: Uint8Array, options: DiagnoseOptions): Promise<Diagnosis> {
  const { secretSource, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, allowV1 = false } = options
  const nowSeconds = options.nowSeconds ?? Math.floor(Date.now() / 1000)
  const checks: Check[] = []
  const findings: Finding[] = []

  // The core refuses a secret with whitespace at startup; diagnose the rest with it trimmed.
  const secret = options.secret.trim()
  if (secret !== options.secret) {
    findings.push({
      cause: 'whitespace in the secret',
      why: `the secret from ${secretSource} has leading or trailing whitespace; the receiver refuses to start with it (TypeError at createWebhookReceiver).`,
      fix: 'remove the whitespace (often a newline copied with the secret, or a quoted value in a .env file). The checks below use the trimmed secret.',
    })
  }
  const prefixed = secret.startsWith(SECRET_PREFIX)
  checks.push({
    rule: 'secret',
    ok: prefixed && secret === options.secret,
    detail: `${secret.length} characters from ${secretSource}${secret === options.secret ? '' : ' (after trimming whitespace)'}, ${prefixed ? `"${SECRET_PREFIX}" prefix present` : `no "${SECRET_PREFIX}" prefix`}`,
  })

  const secretFindings = findings.length

  // 1. The verdict, from the core exactly as a receiver with these options would reach it.
  const verifyOptions = { secret, toleranceSeconds, allowV1, now: () => nowSeconds * 1000 }
  const diagnosis: Diagnosis = { ok: false, checks, findings }
  try {
    const delivery = await verifyWebhook({ body, headers }, verifyOptions)
    Object.assign(diagnosis, { ok: secret === options.secret, id: delivery.id, eventType: delivery.event.event, signatureVersion: delivery.signatureVersion })
    if (!diagnosis.ok) Object.assign(diagnosis, { code: 'invalid_secret' })
  } catch (error) {
    if (!isWebhookVerificationError(error)) throw error
    Object.assign(diagnosis, { code: error.code, status: error.status })
  }

  // 2. Each header rule on its own, judged by the core's header checks (src/headers.ts).
  const rule = headerRules(headers, nowSeconds)
  const id = rule([HEADER_ID])
  const format = rule([HEADER_TIMESTAMP])
  const hasV2 = passed(rule([HEADER_SIGNATURE_V2]))
  const hasV1 = passed(rule([HEADER_SIGNATURE_V1]))
  const absent: Record<(typeof REQUIRED)[number], boolean> = {
    [HEADER_ID]: id === 'missing_id',
    [HEADER_TIMESTAMP]: format === 'missing_timestamp',
    [HEADER_SIGNATURE_V2]: !hasV2,
    [HEADER_SIGNATURE_V1]: !hasV1,
  }
  const missing = REQUIRED.filter((name) => absent[name])
  const lookalikes = REQUIRED.flatMap((name) => lookalike(headers, name))
  checks.push({
    rule: 'headers',
    ok: !absent[HEADER_ID] && !absent[HEADER_TIMESTAMP] && (hasV2 || (allowV1 && hasV1)),
    detail: missing.length === 0 ? 'svc-webhook-id, -timestamp, -signature-v2 and -signature present' : `missing: ${missing.join(', ')}`,
  })
  const lost: string[] = missing.filter((name) => name === HEADER_ID || name === HEADER_TIMESTAMP)
  if (!hasV2 && !hasV1) lost.push(`${HEADER_SIGNATURE_V2} (nor ${HEADER_SIGNATURE_V1})`)
  if (lost.length > 0) {
    findings.push({
      cause: 'missing headers',
      why: `the request has no ${lost.join(', ')}.` + (lookalikes.length > 0 ? ` It has ${lookalikes.join(', ')}: renamed on the way.` : ''),
      fix: `${FIXES.missing_id.fix} And check the capture kept them.`,
    })
  }

  // 3. Timestamp.
  if (format === 'missing_timestamp') checks.push({ rule: 'timestamp', ok: false, notRun: true, detail: 'not run: fix "headers" first' })
  if (format === 'invalid_timestamp') {
    checks.push({ rule: 'timestamp', ok: false, detail: 'not Unix time in whole seconds' })
    findings.push({ cause: 'malformed timestamp', why: `${FIXES.invalid_timestamp.cause}.`, fix: FIXES.invalid_timestamp.fix })
  }
  const timestamp = passed(format) ? format.timestamp : undefined
  if (timestamp !== undefined) {
    const window = rule([HEADER_TIMESTAMP], toleranceSeconds)
    const skew = nowSeconds - timestamp
    const when = skew >= 0 ? `${skew} s old` : `${-skew} s in the future`
    checks.push({ rule: 'timestamp', ok: passed(window), detail: `${when} (tolerance ${toleranceSeconds} s)` })
    if (!passed(window)) {
      findings.push({
        cause: window === 'timestamp_too_old' ? 'stale timestamp' : 'timestamp in the future',
        why: `the signed timestamp is ${when}, outside the ${toleranceSeconds} s tolerance, so it is refused as a possible replay (skew ${skew} s).`,
        fix:
          (window === 'timestamp_too_old'
            ? 'If you are checking a capture after the fact, that is expected: pass --now <the Unix time it arrived> to check the rest. '
            : '') + `If it was refused live: ${FIXES[window === 'timestamp_too_old' ? 'timestamp_too_old' : 'timestamp_in_future'].fix}`,
      })
    }
  }

  // 4. Signatures, with the clock set to the signed timestamp so only the bytes and the secret count.
  // They cover the id and the timestamp: without both, a mismatch would name a wrong cause.
  if (timestamp === undefined || !passed(id)) {
    let first = 'fix "timestamp" first'
    if (id === 'missing_id' || format === 'missing_timestamp') first = 'fix "headers" first'
    else if (!passed(id)) first = 'svc-webhook-id is malformed; fix it first'
    checks.push({ rule: 'signature', ok: false, notRun: true, detail: `not run: ${first}` })
  } else {
    const match = (s: string, b: Uint8Array, v: 'v2' | 'v1') => matches(headers, b, s, v, timestamp)
    const v2 = hasV2 && (await match(secret, body, 'v2'))
    const v1 = hasV1 && (await match(secret, body, 'v1'))
    checks.push({
      rule: 'signature',
      ok: v2 || (v1 && allowV1 && !hasV2),
      detail: [hasV2 ? `v2 ${v2 ? 'matches' : 'does not match'}` : 'no v2', hasV1 ? `v1 ${v1 ? 'matches' : 'does not match'}` : 'no v1'].join(', '),
    })
    if (!hasV2 && hasV1 && !allowV1) {
      findings.push({
        cause: 'v1-only delivery',
        why: `the request carries only the legacy v1 signature${v1 ? ' (it matches)' : ''}; v2 is required by default. The service sends both on every delivery, so the v2 header was lost on the way.`,
        fix: FIXES.v1_not_allowed.fix,
      })
    }
    if (hasV2 && !v2) {
      if (v1) {
        findings.push({
          cause: 'delivery id changed',
          why: 'the v1 signature matches this secret but v2 does not: v2 also covers svc-webhook-id, so the id header (or the v2 header itself) was changed after signing.',
          fix: 'forward svc-webhook-id and svc-webhook-signature-v2 unchanged. The secret and the body are right.',
        })
      } else {
        findings.push(await explainMismatch(body, secret, 'v2', match, options.target))
      }
    } else if (!hasV2 && hasV1 && !v1) {
      findings.push(await explainMismatch(body, secret, 'v1', match, options.target))
    }
  }

  if (diagnosis.code === 'invalid_json') {
    findings.push({
      cause: 'body is not an event',
      why: `${FIXES.invalid_json.cause}.`,
      fix: `${FIXES.invalid_json.fix} Check the capture kept the whole body (and --body points at the body, not the headers).`,
    })
  }
  // Any other refusal the checks above did not explain: the code's own cause and fix.
  const { code } = diagnosis
  if (code !== undefined && code !== 'invalid_secret' && findings.length === secretFindings) {
    findings.push({ cause: code.replace(/_/g, ' '), why: `${FIXES[code].cause}.`, fix: FIXES[code].fix })
  }
  if (diagnosis.ok && !prefixed) {
    findings.push({
      cause: 'secret without prefix',
      why: `it verifies, but the secret does not start with "${SECRET_PREFIX}" as the service's secrets do.`,
      fix: 'fine for a test sender of your own; for the service, use the whole value it returned.',
    })
  }
  return diagnosis
}

/** Why no signature matched: the first alternative secret or body that would verify names the cause. */
async function explainMismatch(
  body: Uint8Array,
  secret: string,
  version: 'v2' | 'v1',
  match: (s: string, b: Uint8Array, v: 'v2' | 'v1') => Promise<boolean>,
  target?: string,
): Promise<Finding> {
  const secrets: { secret: string; cause?: Finding }[] = [{ secret }]
  if (!secret.startsWith(SECRET_PREFIX)) {
    secrets.push({
      secret: SECRET_PREFIX + secret,
      cause: {
        cause: 'secret prefix missing',
        why: `the signature matches the secret with "${SECRET_PREFIX}" in front: the HMAC key is the whole secret, prefix included.`,
        fix: `use the secret exactly as the service returned it, starting with "${SECRET_PREFIX}".`,
      },
    })
  } else {
    secrets.push({
      secret: secret.slice(SECRET_PREFIX.length),
      cause: {
        cause: 'sender dropped the prefix',
        why: `the signature matches the secret without its "${SECRET_PREFIX}" prefix: the sender signed with a shortened key.`,
        fix: `sign with the whole secret, "${SECRET_PREFIX}" included, as the service does (svc-webhooks/testing signWebhook does).`,
      },
    })
  }
  for (const candidate of secrets) {
    for (const form of bodyForms(body)) {
      if (candidate.cause === undefined && form.name === 'as received') continue
      if (!(await match(candidate.secret, form.bytes, version))) continue
      if (candidate.cause) return candidate.cause
      if (form.name === 'without the trailing newline') {
        return {
          cause: 'trailing newline in the body file',
          why: 'the signature matches the body without its final newline: the capture (or an editor) added one the delivery did not have.',
          fix: 'save the body byte for byte (curl --output, or write the raw bytes from your handler); do not open and re-save it in an editor.',
        }
      }
      return {
        cause: 're-serialized body',
        why: `the signature matches this body written ${form.name}, not the bytes given: something parsed the JSON and wrote it back (a body parser, a logger, a proxy) before it was verified or captured.`,
        fix: `${RAW_BYTES}, and capture the raw body, not JSON.stringify(req.body).`,
      }
    }
  }
  return {
    cause: 'wrong secret',
    why: 'no signature matches this secret, nor any re-serialization of the body with it, nor the secret with its prefix added or removed.',
    fix:
      `use ${SAME_SECRET}. Check you are not using another endpoint's or environment's secret` +
      (target === undefined ? '.' : ` (it was sent to ${target}: on a receiver of many endpoints, one secret per tenant, use the secret of the endpoint that path names).`),
  }
}

/** The body as a sender might have signed it before someone re-serialized it. */
function bodyForms(body: Uint8Array): { name: string; bytes: Uint8Array }[] {
  const forms: { name: string; bytes: Uint8Array }[] = [{ name: 'as received', bytes: body }]
  const text = decoder.decode(body)
  const trimmed = text.replace(/(\r?\n)+$/, '')
  if (trimmed !== text) forms.push({ name: 'without the trailing newline', bytes: encoder.encode(trimmed) })
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return forms
  }
  const candidates: [string, string][] = [
    ['with sorted keys and no whitespace (as the service sends it)', serializeEvent(parsed)],
    ['with sorted keys, no whitespace and non-ASCII as \\u escapes (as the service may send it)', asciiEscape(serializeEvent(parsed))],
    ['as JSON.stringify(JSON.parse(body))', JSON.stringify(parsed)],
    ['pretty-printed with 2 spaces', JSON.stringify(parsed, null, 2)],
    ['pretty-printed with 4 spaces', JSON.stringify(parsed, null, 4)],
    ['pretty-printed with tabs', JSON.stringify(parsed, null, '\t')],
  ]
  for (const [name, candidate] of candidates) {
    if (candidate !== text && !forms.some((f) => decoder.decode(f.bytes) === candidate)) forms.push({ name, bytes: encoder.encode(candidate) })
  }
  return forms
}

/** JSON text with every non-ASCII character as a `\uXXXX` escape (Python's `ensure_ascii`). */
function asciiEscape(json: string): string {
  return json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** Whether the `version` signature in `headers` matches `secret` over `body`, the clock set to the signed time. */
async function matches(headers: CapturedHeaders, body: Uint8Array, secret: string, version: 'v2' | 'v1', timestamp: number): Promise<boolean> {
  const only: CapturedHeaders = { ...headers }
  if (version === 'v1') delete only[HEADER_SIGNATURE_V2]
  else delete only[HEADER_SIGNATURE_V1]
  try {
    const verified = await verifySignature(
      { body, headers: only },
      { secret, allowV1: version === 'v1', now: () => timestamp * 1000, maxBodyBytes: Math.max(1, body.byteLength) },
    )
    return verified.signatureVersion === version
  } catch {
    return false
  }
}

/**
 * The core's header checks (readSignedHeaders) with only the `real` headers read from the capture
 * and the others replaced by values that pass, so each rule's verdict is its own: a stale
 * timestamp still lets the id be judged. A signature header under test is judged alone (the
 * other one reads as absent). Returns what the core read, or the code it refused with.
 */
function headerRules(headers: CapturedHeaders, nowSeconds: number) {
  const passing: Record<string, string> = { [HEADER_ID]: 'diagnose', [HEADER_TIMESTAMP]: String(nowSeconds), [HEADER_SIGNATURE_V2]: `v2=${'0'.repeat(64)}` }
  return (real: readonly string[], toleranceSeconds = Number.MAX_SAFE_INTEGER): SignedHeaders | WebhookErrorCode => {
    const signatureUnderTest = real.includes(HEADER_SIGNATURE_V2) || real.includes(HEADER_SIGNATURE_V1)
    const get = (source: CapturedHeaders, name: string): HeaderValue => {
      if (real.includes(name)) return getHeader(source, name)
      if (signatureUnderTest && (name === HEADER_SIGNATURE_V2 || name === HEADER_SIGNATURE_V1)) return undefined
      return passing[name]
    }
    try {
      return readSignedHeaders(headers, get, { allowV1: true, toleranceSeconds, now: () => nowSeconds * 1000 })
    } catch (error) {
      if (isWebhookVerificationError(error)) return error.code
      throw error
    }
  }
}

function passed(verdict: SignedHeaders | WebhookErrorCode): verdict is SignedHeaders {
  return typeof verdict !== 'string'
}

/** Headers whose names look like `name` renamed: `x-svc-webhook-id`, `http_svc_webhook_id`. */
function lookalike(headers: CapturedHeaders, name: string): string[] {
  return Object.keys(headers).filter((key) => {
    const normal = key.toLowerCase().replace(/_/g, '-').replace(/^(x-|http-)/, '')
    return normal === name && key.toLowerCase() !== name
  })
}
