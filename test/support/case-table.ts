/**
 * The one case table every adapter must answer identically (issue: adapters in their real
 * runtimes). Each target is a real server on 127.0.0.1 running a "case app" built as described
 * in CASE_APP below; the table sends real signed deliveries over HTTP and reads the handler's
 * own record of runs back from the app.
 *
 * CASE_APP contract, implemented once per adapter/runtime:
 * - secret CASE_SECRET, maxBodyBytes CASE_MAX_BODY_BYTES, default tolerance, v1 not allowed,
 *   a fresh store per app (MemoryStore unless the runtime has its own, e.g. the Durable Object store).
 * - POST CASE_PATH: the adapter in receiver mode with one handler, for 'message.received':
 *     - records an attempt for delivery.id;
 *     - if event.message.text === 'slow': waits 300 ms before finishing;
 *     - if event.message.text === 'fail-once' and this is the first attempt for this id: throws;
 *     - otherwise records a successful run for delivery.id.
 * - GET RUNS_PATH: JSON { runs: { [id]: successfulRuns }, attempts: { [id]: attempts } }.
 */
import { describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

import { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, RUNS_PATH } from './case-table-constants.js'

export { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, RUNS_PATH }

export interface CaseTarget {
  /** Base URL, e.g. http://127.0.0.1:43123 */
  url: string
  /** Path of the webhook route. @default CASE_PATH */
  path?: string
  /** Path of the runs record. @default RUNS_PATH */
  runsPath?: string
  close?: () => Promise<void>
}

interface Answer {
  status: number
  json: Record<string, unknown> | undefined
  retryAfter: string | null
}

async function post(url: string, body: string | Uint8Array, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', body: body as BodyInit, headers })
  const text = await res.text()
  let json: Record<string, unknown> | undefined
  try {
    json = JSON.parse(text) as Record<string, unknown>
  } catch {
    json = undefined
  }
  return { status: res.status, json, retryAfter: res.headers.get('retry-after') }
}

async function runsOf(target: CaseTarget, id: string): Promise<number> {
  const res = await fetch(target.url + (target.runsPath ?? RUNS_PATH))
  const record = (await res.json()) as { runs: Record<string, number> }
  return record.runs[id] ?? 0
}

function message(text: string) {
  const event = sampleEvent('message.received')
  event.message.text = text
  return event
}

/**
 * Registers the case table against a target started by `start` (called once, in beforeAll).
 *
 * @example
 * describeCaseTable('express 5', async () => startExpressApp())
 */
export function describeCaseTable(name: string, start: () => Promise<CaseTarget>, timeoutMs = 30_000): void {
  describe(`case table: ${name}`, () => {
    let target: CaseTarget
    const endpoint = () => target.url + (target.path ?? CASE_PATH)

    it('starts', async () => {
      target = await start()
      expect(target.url).toMatch(/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/)
    }, 180_000)

    it('valid delivery -> 200, handler runs once', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('hello') })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject({ ok: true })
      expect(await runsOf(target, signed.id)).toBe(1)
    }, timeoutMs)

    it('resend of a processed id -> 200 duplicate, handler not run again', async () => {
      const event = message('resend me')
      const first = await signWebhook({ secret: CASE_SECRET, event })
      expect((await post(endpoint(), first.body, first.headers)).status).toBe(200)
      const again = await signWebhook({ secret: CASE_SECRET, event, id: first.id, timestamp: first.timestamp + 1 })
      const res = await post(endpoint(), again.body, again.headers)
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject({ ok: true, duplicate: true })
      expect(await runsOf(target, first.id)).toBe(1)
    }, timeoutMs)

    it('10 concurrent copies of a slow delivery -> exactly one run, the rest 429 or duplicate, never 409', async () => {
      const first = await signWebhook({ secret: CASE_SECRET, event: message('slow') })
      const copies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          signWebhook({ secret: CASE_SECRET, event: message('slow'), id: first.id, timestamp: first.timestamp + (i % 3) }),
        ),
      )
      const answers = await Promise.all(copies.map((c) => post(endpoint(), c.body, c.headers)))
      const statuses = answers.map((a) => a.status)
      for (const a of answers) {
        expect([200, 429]).toContain(a.status)
        if (a.status === 429) expect(Number(a.retryAfter)).toBeGreaterThan(0)
      }
      expect(answers.filter((a) => a.status === 200 && a.json?.duplicate !== true).length, String(statuses)).toBe(1)
      expect(await runsOf(target, first.id)).toBe(1)
    }, timeoutMs)

    it('handler throws once -> 500, the retry runs it -> 200', async () => {
      const event = message('fail-once')
      const first = await signWebhook({ secret: CASE_SECRET, event })
      const failed = await post(endpoint(), first.body, first.headers)
      expect(failed.status).toBe(500)
      expect(failed.json).toMatchObject({ ok: false, code: 'handler_failed' })
      const retry = await signWebhook({ secret: CASE_SECRET, event, id: first.id, timestamp: first.timestamp + 5 })
      const ok = await post(endpoint(), retry.body, retry.headers)
      expect(ok.status).toBe(200)
      expect(ok.json).toMatchObject({ ok: true })
      expect(ok.json?.duplicate).toBeUndefined()
      expect(await runsOf(target, first.id)).toBe(1)
    }, timeoutMs)

    it('event type with no handler -> 200 ignored', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: { event: 'template.approved', id: 'x' } })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject({ ok: true, ignored: true })
    }, timeoutMs)

    it('v1-only delivery -> 401 v1_not_allowed', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('v1'), schemes: ['v1'] })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(401)
      expect(res.json).toMatchObject({ code: 'v1_not_allowed' })
      expect(await runsOf(target, signed.id)).toBe(0)
    }, timeoutMs)

    it('tampered body -> 401 invalid_signature, handler not run', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('pay 10') })
      const res = await post(endpoint(), signed.body.replace('pay 10', 'pay 99'), signed.headers)
      expect(res.status).toBe(401)
      expect(res.json).toMatchObject({ code: 'invalid_signature' })
      expect(await runsOf(target, signed.id)).toBe(0)
    }, timeoutMs)

    it('wrong secret -> 401 invalid_signature', async () => {
      const signed = await signWebhook({ secret: 'svc_whsec_not-the-right-one', event: message('hi') })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(401)
      expect(res.json).toMatchObject({ code: 'invalid_signature' })
    }, timeoutMs)

    it('stale timestamp -> 401 timestamp_too_old', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('old'), timestamp: Math.floor(Date.now() / 1000) - 3600 })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(401)
      expect(res.json).toMatchObject({ code: 'timestamp_too_old' })
    }, timeoutMs)

    it('malformed timestamp -> 400 invalid_timestamp', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('ts') })
      const res = await post(endpoint(), signed.body, { ...signed.headers, 'svc-webhook-timestamp': '17e9' })
      expect(res.status).toBe(400)
      expect(res.json).toMatchObject({ code: 'invalid_timestamp' })
    }, timeoutMs)

    it('missing signature -> 401 missing_signature', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('nosig'), schemes: [] })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(401)
      expect(res.json).toMatchObject({ code: 'missing_signature' })
    }, timeoutMs)

    it('oversize body -> 413 body_too_large', async () => {
      const big = message('x'.repeat(CASE_MAX_BODY_BYTES + 1))
      const signed = await signWebhook({ secret: CASE_SECRET, event: big })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(413)
      expect(res.json).toMatchObject({ code: 'body_too_large' })
    }, timeoutMs)

    it('signed body that is not JSON -> 400 invalid_json', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, body: 'not json at all' })
      const res = await post(endpoint(), signed.body, signed.headers)
      expect(res.status).toBe(400)
      expect(res.json).toMatchObject({ code: 'invalid_json' })
    }, timeoutMs)

    it('GET -> 405 with Allow: POST', async () => {
      const res = await fetch(endpoint(), { method: 'GET' })
      expect(res.status).toBe(405)
      expect(res.headers.get('allow')).toBe('POST')
      await res.text()
    }, timeoutMs)

    it('keeps serving after all of the above', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: message('still here') })
      expect((await post(endpoint(), signed.body, signed.headers)).status).toBe(200)
      await target.close?.()
    }, timeoutMs)
  })
}
