/**
 * svc-webhooks/express on real Express 5 and Express 4 servers on 127.0.0.1: the shared case
 * table, plus what only Express has: a body parser mounted first, express.raw(), verify-only mode.
 */
import express from 'express'
import express4 from 'express4'
import type { ErrorRequestHandler, Request } from 'express'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { webhooks } from 'svc-webhooks/express'
import { MemoryInbox, type VerifiedDelivery, type WebhookErrorCode } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, createCaseApp, RUNS_PATH, TENANT_ROUTE, variantPath, VARIANTS } from '../support/case-app.js'
import { listen, postChunked, type RunningServer } from '../support/servers.js'

const versions = [
  { name: 'express 5', express },
  { name: 'express 4', express: express4 },
]

function caseServer(e: typeof express) {
  const cases = createCaseApp({ inbox: () => new MemoryInbox() })
  const app = e()
  app.all(CASE_PATH, webhooks(cases.options))
  // Many endpoints, one receiver: the tenant from Express's own route params (a named one is a
  // string; Express 5 types a param as string | string[] for wildcards).
  const tenantOf = (req: Request) => (typeof req.params.tenant === 'string' ? req.params.tenant : undefined)
  app.all(TENANT_ROUTE, webhooks(cases.tenantOptions(tenantOf)))
  // The variant routes, one receiver each on its own path; express.json() in front of the
  // parsed-body one, as an app that mounts it for every route has it.
  for (const variant of VARIANTS) {
    app.all(variantPath(variant), ...(variant === 'parsed-body' ? [e.json()] : []), webhooks(cases.variantOptions(variant)))
  }
  app.get(RUNS_PATH, (_req, res) => {
    res.type('json').send(cases.runsJson())
  })
  return listen(app)
}

/** Records what reaches Express's error handler and answers with its status. */
function errorRecorder() {
  const seen: { status?: number; code?: WebhookErrorCode; message: string }[] = []
  const handler: ErrorRequestHandler = (err, _req, res, _next) => {
    seen.push({ status: err.status, code: err.code, message: String(err.message) })
    res.status(err.status ?? 500).json({ handled: true })
  }
  return { seen, handler }
}

for (const { name, express: e } of versions) {
  describeCaseTable(name, async () => httpTransport(await caseServer(e)))

  describe(`svc-webhooks/express on ${name}`, () => {
    const servers: RunningServer[] = []
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.close()))
    })
    const start = async (app: ReturnType<typeof express>) => {
      const server = await listen(app)
      servers.push(server)
      return server.url
    }

    it('express.json() mounted first -> the JSON answer 500 body_already_parsed (no error page), the fix logged, handler not run', async () => {
      const cases = createCaseApp()
      const lines: string[] = []
      const app = e()
      app.use(e.json())
      app.post(CASE_PATH, webhooks({ ...cases.options, log: (line) => void lines.push(line) }))
      app.set('env', 'development') // finalhandler's error page would show the stack with file paths
      const url = await start(app)
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(500)
      expect(res.headers.get('content-type')).toMatch(/^application\/json/)
      expect(await res.json()).toEqual({ ok: false, code: 'body_already_parsed' })
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain('body_already_parsed')
      expect(lines[0]).toMatch(/before express\.json\(\)/)
      expect(lines[0]).not.toContain(CASE_SECRET)
      expect(cases.record().attempts).toEqual({})
    })

    it('express.json() mounted first, verify-only -> 500 body_already_parsed sent to next(err) with the fix', async () => {
      const errors = errorRecorder()
      const app = e()
      app.use(e.json())
      app.post(CASE_PATH, webhooks({ secret: CASE_SECRET }), (_req, res) => void res.json({ ok: true }))
      app.use(errors.handler)
      const url = await start(app)
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(500)
      expect(await res.json()).toEqual({ handled: true })
      expect(errors.seen).toHaveLength(1)
      expect(errors.seen[0]).toMatchObject({ status: 500, code: 'body_already_parsed' })
      expect(errors.seen[0]!.message).toMatch(/before express\.json\(\)/)
      expect(errors.seen[0]!.message).not.toContain(CASE_SECRET)
    })

    it('a body parser that skipped the request (other content type) leaves the stream readable -> 200', async () => {
      const cases = createCaseApp()
      const app = e()
      app.use(e.urlencoded({ extended: false })) // Express 4 sets req.body = {} even when it skips
      app.post(CASE_PATH, webhooks(cases.options))
      const url = await start(app)
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(200)
      expect(cases.record().runs).toEqual({ [signed.id]: 1 })
    })

    it('express.raw() left a Buffer: verified from it, handler runs once', async () => {
      const cases = createCaseApp()
      const app = e()
      app.post(CASE_PATH, e.raw({ type: '*/*' }), webhooks(cases.options))
      const url = await start(app)
      const event = sampleEvent('message.received')
      event.message.text = 'héllo \u2603 "raw"'
      const signed = await signWebhook({ secret: CASE_SECRET, event })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ ok: true })
      expect(cases.record().runs).toEqual({ [signed.id]: 1 })
    })

    it('oversize body streamed without Content-Length -> 413 body_too_large', async () => {
      const cases = createCaseApp()
      const app = e()
      app.post(CASE_PATH, webhooks(cases.options))
      const url = await start(app)
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await postChunked(url + CASE_PATH, CASE_MAX_BODY_BYTES * 8, { ...signed.headers })
      expect(res.status).toBe(413)
      expect(res.json).toEqual({ ok: false, code: 'body_too_large' })
      expect(cases.record().attempts).toEqual({})
    })

    describe('verify-only mode (no `on`)', () => {
      let url: string
      const errors = errorRecorder()
      const delivered: VerifiedDelivery[] = []

      beforeAll(async () => {
        const app = e()
        app.post(CASE_PATH, webhooks({ secret: CASE_SECRET, maxBodyBytes: CASE_MAX_BODY_BYTES }), (req, res) => {
          expectTypeOf(req.webhook).toEqualTypeOf<VerifiedDelivery | undefined>()
          delivered.push(req.webhook!)
          res.json({ received: req.webhook!.id })
        })
        app.use(errors.handler)
        url = await start(app)
      })

      it('a valid delivery sets req.webhook and reaches the next handler', async () => {
        const event = sampleEvent('message.received')
        const signed = await signWebhook({ secret: CASE_SECRET, event })
        const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
        expect(res.status).toBe(200)
        expect(await res.json()).toEqual({ received: signed.id })
        expect(delivered.at(-1)).toMatchObject({ id: signed.id, signatureVersion: 'v2', event })
        expect(new TextDecoder().decode(delivered.at(-1)!.rawBody)).toBe(signed.body)
      })

      it('a bad signature goes to the error handler with err.status 401', async () => {
        const signed = await signWebhook({ secret: 'svc_whsec_wrong', event: sampleEvent('message.received') })
        const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
        expect(res.status).toBe(401)
        expect(errors.seen.at(-1)).toMatchObject({ status: 401, code: 'invalid_signature' })
      })

      it('an oversize chunked body goes to the error handler with err.status 413', async () => {
        const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
        const res = await postChunked(url + CASE_PATH, CASE_MAX_BODY_BYTES * 4, { ...signed.headers })
        expect(res.status).toBe(413)
        expect(errors.seen.at(-1)).toMatchObject({ status: 413, code: 'body_too_large' })
      })
    })
  })
}

describe('svc-webhooks/express options', () => {
  it('invalid options throw when the middleware is created, in both modes', () => {
    expect(() => webhooks({ secret: '' })).toThrow(TypeError)
    expect(() => webhooks({ secret: '', on: {} })).toThrow(TypeError)
    expect(() => webhooks({ secret: CASE_SECRET, toleranceSeconds: 0 })).toThrow(/toleranceSeconds/)
  })
})
