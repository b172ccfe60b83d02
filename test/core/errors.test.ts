/**
 * `WebhookVerificationError`: every code with its status, the cross-realm guard (an error thrown
 * by the CJS build recognised by the ESM guard), messages that never carry the secret, an
 * expected signature or the body, and options rejected when the receiver is created.
 */
import { createRequire } from 'node:module'
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import * as esm from 'svc-webhooks'
import {
  ANSWERS,
  createWebhookReceiver,
  ERROR_STATUS,
  isWebhookVerificationError,
  readRequestBody,
  verifyWebhook,
  WebhookVerificationError,
  type VerifyOptions,
  type WebhookErrorCode,
} from 'svc-webhooks'
import { signWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_SecretMarkerZXCVBNM0987'
const BODY_MARKER = 'BodyMarker-qwertyuiop'
const NOW = 1_763_806_530
const body = `{"event":"message.received","message":{"text":"${BODY_MARKER}"}}`

it('has exactly these codes, with these statuses', () => {
  expect(ERROR_STATUS).toEqual({
    body_already_parsed: 500,
    body_too_large: 413,
    missing_id: 400,
    invalid_id: 400,
    missing_timestamp: 400,
    invalid_timestamp: 400,
    timestamp_too_old: 401,
    timestamp_in_future: 401,
    missing_signature: 401,
    v1_not_allowed: 401,
    invalid_signature: 401,
    invalid_json: 400,
    body_timeout: 503,
    unknown_endpoint: 404,
    secret_lookup_failed: 503,
    secret_pending: 503,
  })
  const error = new WebhookVerificationError('invalid_signature', 'no match', { cause: 'why' })
  expect(error).toBeInstanceOf(Error)
  expect(error).toMatchObject({ name: 'WebhookVerificationError', code: 'invalid_signature', status: 401, cause: 'why' })
})

describe('the answers table', () => {
  const rows = Object.entries(ANSWERS)

  it('gives every code of ERROR_STATUS a refusal row: its status, and { ok: false, code } as the body', () => {
    for (const [code, status] of Object.entries(ERROR_STATUS)) {
      expect(ANSWERS[code as WebhookErrorCode], code).toMatchObject({ outcome: 'refused', status, body: { ok: false, code } })
    }
  })

  it('sends Retry-After exactly with a 429 or 503, and closes the connection only for a body that never finished arriving', () => {
    for (const [name, row] of rows) expect('retryAfter' in row && row.retryAfter === true, name).toBe(row.status === 429 || row.status === 503)
    expect(rows.filter(([, row]) => 'close' in row && row.close).map(([name]) => name)).toEqual(['body_timeout'])
  })

  it('names the code in the body of every answer that is not a 2xx', () => {
    for (const [name, row] of rows) expect(row.body, name).toEqual(row.status < 300 ? expect.objectContaining({ ok: true }) : { ok: false, code: name })
  })

  it('gives every row a short cause and fix, as the log, the CLI and the README print them', () => {
    for (const [name, row] of rows) {
      for (const text of [row.cause, row.fix]) {
        expect(text.length, `${name}: ${text}`).toBeGreaterThan(10)
        expect(text.length, `${name}: ${text}`).toBeLessThanOrEqual(160)
        // The printers add the punctuation.
        expect(text, name).not.toMatch(/[.;:\s]$/)
      }
    }
  })
})

interface ErrorPath {
  code: WebhookErrorCode
  input: { body: unknown; headers: Record<string, string> }
  options?: Partial<VerifyOptions>
}

/** One delivery per error path: the input that produces `code`, and the options to verify with. */
async function errorPaths(secret: string): Promise<ErrorPath[]> {
  const signed = await signWebhook({ secret, body, id: 'evt-1', timestamp: NOW })
  const h = signed.headers
  const without = (...names: string[]) => Object.fromEntries(Object.entries(h).filter(([k]) => !names.includes(k)))
  const notJson = await signWebhook({ secret, body: `not json ${BODY_MARKER}`, id: 'evt-1', timestamp: NOW })
  return [
    { code: 'body_already_parsed', input: { body: JSON.parse(body), headers: h } },
    { code: 'body_too_large', input: { body, headers: h }, options: { maxBodyBytes: 10 } },
    { code: 'body_too_large', input: { body: signed.rawBody, headers: h }, options: { maxBodyBytes: 10 } },
    { code: 'missing_id', input: { body, headers: without('svc-webhook-id') } },
    { code: 'invalid_id', input: { body, headers: { ...h, 'svc-webhook-id': `${BODY_MARKER} x` } } },
    { code: 'missing_timestamp', input: { body, headers: without('svc-webhook-timestamp') } },
    { code: 'invalid_timestamp', input: { body, headers: { ...h, 'svc-webhook-timestamp': '-1' } } },
    { code: 'timestamp_too_old', input: { body, headers: h }, options: { now: () => (NOW + 301) * 1000 } },
    { code: 'timestamp_in_future', input: { body, headers: h }, options: { now: () => (NOW - 301) * 1000 } },
    { code: 'missing_signature', input: { body, headers: without('svc-webhook-signature-v2', 'svc-webhook-signature') } },
    { code: 'v1_not_allowed', input: { body, headers: without('svc-webhook-signature-v2') } },
    { code: 'invalid_signature', input: { body: body.replace('text', 'texT'), headers: h } },
    { code: 'invalid_signature', input: { body: body.replace('text', 'texT'), headers: without('svc-webhook-signature-v2') }, options: { allowV1: true } },
    { code: 'invalid_signature', input: { body, headers: h }, options: { secret: `${secret}x` } },
    { code: 'invalid_signature', input: { body, headers: h }, options: { secret: ['svc_whsec_old', `${secret}x`] } },
    { code: 'invalid_signature', input: { body, headers: { ...h, 'svc-webhook-signature-v2': 'v2=nothex' } } },
    { code: 'invalid_json', input: { body: notJson.rawBody, headers: notJson.headers } },
    { code: 'unknown_endpoint', input: { body, headers: h }, options: { secret: () => undefined, endpoint: 'tenant' } as Partial<VerifyOptions> },
    {
      code: 'secret_lookup_failed',
      input: { body, headers: h },
      options: { secret: () => Promise.reject(new Error('vault down')), endpoint: 'tenant' } as Partial<VerifyOptions>,
    },
    { code: 'secret_lookup_failed', input: { body, headers: h }, options: { secret: () => ` ${secret}\n`, endpoint: 'tenant' } as Partial<VerifyOptions> },
    // A secret source: unreadable, holding garbage, or pending a change the delivery's secret belongs to.
    { code: 'secret_lookup_failed', input: { body, headers: h }, options: { secret: { read: () => Promise.reject(new Error('redis down')) } } },
    { code: 'secret_lookup_failed', input: { body, headers: h }, options: { secret: { read: () => ({ secrets: [` ${secret}`] }) } } },
    {
      code: 'secret_pending',
      input: { body, headers: h },
      options: { secret: { read: () => ({ secrets: [`${secret}x`], pendingUntil: (NOW + 60) * 1000 }) }, secretRereadMs: 1 },
    },
  ]
}

describe.each([SECRET, 'unprefixed-SecretMarker-0987'])('every error path, secret %s', (secret) => {
  it('throws the right code and status, and no message, stack or inspection holds the secret, a signature or the body', async () => {
    const paths = await errorPaths(secret)
    const signed = await signWebhook({ secret, body, id: 'evt-1', timestamp: NOW })
    const forbidden = [
      secret,
      'SecretMarker',
      BODY_MARKER,
      signed.headers['svc-webhook-signature-v2']!.slice(3),
      signed.headers['svc-webhook-signature']!.slice(3),
    ]
    const seen = new Set<string>()
    for (const { code, input, options } of paths) {
      const error = await verifyWebhook(input as never, { secret, now: () => NOW * 1000, ...options }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(isWebhookVerificationError(error), code).toBe(true)
      const e = error as WebhookVerificationError
      expect(e.code).toBe(code)
      expect(e.status).toBe(ERROR_STATUS[code])
      seen.add(e.code)
      const texts = [e.message, String(e), e.stack ?? '', inspect(e, { depth: 5 }), JSON.stringify(e), String(e.cause ?? '')]
      for (const text of texts) for (const secretish of forbidden) expect(text, `${code}: ${e.message}`).not.toContain(secretish)
      // The receiver's answer carries the code only.
      const receiver = createWebhookReceiver({ secret, now: () => NOW * 1000, ...options, on: {} })
      const answer = await receiver.handle(input as never)
      expect(answer).toMatchObject({ status: ERROR_STATUS[code], body: JSON.stringify({ ok: false, code }) })
    }
    // A body that never finishes arriving: only a reader meets it, never verifyWebhook.
    const stalled = new Request('http://127.0.0.1/', {
      method: 'POST',
      body: new ReadableStream({ pull: () => new Promise(() => {}) }),
      duplex: 'half',
    } as RequestInit)
    const timeout = (await readRequestBody(stalled, 1024, 20).catch((e: unknown) => e)) as WebhookVerificationError
    expect(timeout).toMatchObject({ code: 'body_timeout', status: 503 })
    seen.add(timeout.code)
    expect([...seen].sort()).toEqual(Object.keys(ERROR_STATUS).sort())
  })
})

describe('messages that say how to fix it', () => {
  it('a parsed body: body_already_parsed names the mounting-order fix', async () => {
    const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
    const error = await verifyWebhook({ body: JSON.parse(body) as never, headers: signed.headers }, { secret: SECRET }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'body_already_parsed', status: 500 })
    expect((error as Error).message).toMatch(/raw request body/)
    expect((error as Error).message).toMatch(/before any JSON body parser/)
    expect((error as Error).message).toContain('express.json()')
  })

  it('an unprefixed secret: the signature error says to use the whole value, prefix included', async () => {
    const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
    const error = await verifyWebhook({ body, headers: signed.headers }, { secret: 'MfKQ9r8GKYqr', now: () => NOW * 1000 }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'invalid_signature' })
    expect((error as Error).message).toContain('svc_whsec_')
    expect((error as Error).message).not.toContain('MfKQ9r8GKYqr')
  })
})

describe('the cross-realm guard', () => {
  it('recognises an error thrown by another copy of the package (the CJS build), instanceof included', async () => {
    const require = createRequire(import.meta.url)
    const cjs = require('svc-webhooks') as typeof esm
    expect(require.resolve('svc-webhooks')).toMatch(/dist[\\/]index\.cjs$/)
    const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
    const error = await cjs.verifyWebhook({ body, headers: signed.headers }, { secret: 'svc_whsec_other', now: () => NOW * 1000 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(esm.WebhookVerificationError)
    expect(error).toBeInstanceOf(cjs.WebhookVerificationError)
    expect(new esm.WebhookVerificationError('missing_id', 'x')).toBeInstanceOf(cjs.WebhookVerificationError)
    expect(Object.assign(new Error('x'), { name: 'WebhookVerificationError', code: 'missing_id' })).not.toBeInstanceOf(cjs.WebhookVerificationError)
    const inboxError = new cjs.InboxError('unavailable', 'RedisInbox.append', 'down')
    expect(inboxError).toBeInstanceOf(esm.InboxError)
    expect(esm.isInboxError(inboxError)).toBe(true)
    expect(new Error('down')).not.toBeInstanceOf(esm.InboxError)
    // A subclass answers instanceof the ordinary way.
    class Narrower extends esm.WebhookVerificationError {}
    expect(error).not.toBeInstanceOf(Narrower)
    expect(new Narrower('missing_id', 'x')).toBeInstanceOf(Narrower)
    expect(new Narrower('missing_id', 'x')).toBeInstanceOf(cjs.WebhookVerificationError)
    expect(esm.isWebhookVerificationError(error)).toBe(true)
    expect(cjs.isWebhookVerificationError(new esm.WebhookVerificationError('missing_id', 'x'))).toBe(true)
    expect(esm.errorResponse(error)).toMatchObject({ status: 401, body: '{"ok":false,"code":"invalid_signature"}' })
  })

  it('carries no stack frames (a refusal is an answer, and capturing a stack would make refusing cost more than accepting), and leaves Error.stackTraceLimit as it was', () => {
    const before = Error.stackTraceLimit
    const error = new esm.WebhookVerificationError('invalid_signature', 'no match')
    expect(error.stack).toBe('WebhookVerificationError: no match')
    expect(Error.stackTraceLimit).toBe(before)
    expect(new Error('x').stack).toMatch(/\n\s+at /)
  })

  it('rejects look-alikes: an Error or a plain object with code and status is not one', () => {
    const fake = Object.assign(new Error('x'), { name: 'WebhookVerificationError', code: 'invalid_signature', status: 401 })
    for (const value of [fake, { code: 'invalid_signature', status: 401 }, null, undefined, 'invalid_signature', 401]) {
      expect(isWebhookVerificationError(value)).toBe(false)
    }
    expect(esm.errorResponse(fake)).toMatchObject({ status: 500, body: '{"ok":false,"code":"internal_error"}' })
  })
})

describe('options are checked when the receiver is created', () => {
  const on = { 'message.received': () => {} }
  const invalid: [string, Record<string, unknown>][] = [
    ['no secret', { secret: undefined }],
    ['empty secret', { secret: '' }],
    ['empty array', { secret: [] }],
    ['an empty secret in the array', { secret: [SECRET, ''] }],
    ['a non-string secret', { secret: [SECRET, 42] }],
    ['a secret with a trailing newline', { secret: `${SECRET}\n` }],
    ['a secret with leading whitespace', { secret: ` ${SECRET}` }],
    ['toleranceSeconds 0', { toleranceSeconds: 0 }],
    ['toleranceSeconds -5', { toleranceSeconds: -5 }],
    ['toleranceSeconds NaN', { toleranceSeconds: Number.NaN }],
    ['toleranceSeconds Infinity', { toleranceSeconds: Infinity }],
    ['toleranceSeconds as a string', { toleranceSeconds: '300' }],
    ['maxBodyBytes 0', { maxBodyBytes: 0 }],
    ['maxBodyBytes -1', { maxBodyBytes: -1 }],
    ['maxBodyBytes 1.5', { maxBodyBytes: 1.5 }],
    ['maxBodyBytes NaN', { maxBodyBytes: Number.NaN }],
    ['allowV1 as a string', { allowV1: 'yes' }],
    ['now not a function', { now: 0 }],
    ['no on', { on: undefined }],
    ['a handler that is not a function', { on: { 'message.received': 'handle' } }],
    ['a store without release', { store: { claim: async () => 'claimed', complete: async () => true } }],
    ['an empty endpoint', { endpoint: '' }],
    ['leaseMs 0', { leaseMs: 0 }],
    ['retentionMs -1', { retentionMs: -1 }],
    ['retryAfterSeconds NaN', { retryAfterSeconds: Number.NaN }],
  ]

  it.each(invalid)('%s: createWebhookReceiver throws a TypeError that does not echo the secret', (_name, override) => {
    let thrown: unknown
    try {
      createWebhookReceiver({ secret: SECRET, on, ...override } as never)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TypeError)
    expect((thrown as Error).message).toMatch(/^svc-webhooks: /)
    expect((thrown as Error).message).not.toContain('SecretMarker')
  })

  it('verifyWebhook rejects the same options with a TypeError, not a refusal status', async () => {
    await expect(verifyWebhook({ body, headers: {} }, { secret: '' })).rejects.toBeInstanceOf(TypeError)
    await expect(verifyWebhook({ body, headers: {} }, { secret: SECRET, toleranceSeconds: 0 })).rejects.toThrow(/cannot switch the timestamp check off/)
  })

  it('valid options pass: one secret, several, an injected clock', () => {
    expect(() => createWebhookReceiver({ secret: SECRET, on })).not.toThrow()
    expect(() => createWebhookReceiver({ secret: [SECRET, 'svc_whsec_old'], toleranceSeconds: 0.5, maxBodyBytes: 1, now: Date.now, on: {} })).not.toThrow()
  })
})
