/**
 * svc-webhooks/hono on a real @hono/node-server on 127.0.0.1: the shared case table, verify-only
 * mode (`c.var.webhook` typed and set, refusals as HTTPException), a body read before the
 * middleware, and an oversize body streamed without Content-Length.
 */
import { getRequestListener } from '@hono/node-server'
import { Hono, type Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { isWebhookVerificationError, MemoryInbox, type VerifiedDelivery } from 'svc-webhooks'
import { webhooks, type WebhookVariables } from 'svc-webhooks/hono'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, createCaseApp, RUNS_PATH, TENANT_ROUTE, variantPath, VARIANTS } from '../support/case-app.js'
import { listen, postChunked, type RunningServer } from '../support/servers.js'

const serve = (app: Hono<any>) => listen(getRequestListener(app.fetch))

describeCaseTable('hono on @hono/node-server', async () => {
  const cases = createCaseApp({ inbox: () => new MemoryInbox() })
  const app = new Hono()
  app.all(CASE_PATH, webhooks(cases.options))
  // Many endpoints, one receiver: the tenant from Hono's own route params.
  app.all(TENANT_ROUTE, webhooks(cases.tenantOptions((c: Context) => c.req.param('tenant'))))
  // The variant routes, one receiver each on its own path; the parsed-body one behind a
  // middleware that reads c.req.json() first, as a validator does.
  for (const variant of VARIANTS) {
    if (variant === 'parsed-body') app.use(variantPath(variant), async (c, next) => void (await c.req.json(), await next()))
    app.all(variantPath(variant), webhooks(cases.variantOptions(variant)))
  }
  app.get(RUNS_PATH, (c) => c.body(cases.runsJson(), 200, { 'content-type': 'application/json' }))
  return httpTransport(await serve(app))
})

describe('svc-webhooks/hono', () => {
  const servers: RunningServer[] = []
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()))
  })
  const start = async (app: Hono<any>) => {
    const server = await serve(app)
    servers.push(server)
    return server.url
  }

  describe('verify-only mode (no `on`)', () => {
    let url: string
    const caught: unknown[] = []
    const delivered: VerifiedDelivery[] = []

    beforeAll(async () => {
      const app = new Hono<{ Variables: WebhookVariables }>()
      const verify = webhooks({ secret: CASE_SECRET, maxBodyBytes: CASE_MAX_BODY_BYTES })
      app.post(`${CASE_PATH}/read-first`, async (c, next) => {
        await c.req.raw.text()
        await next()
      }, verify)
      app.post(CASE_PATH, verify, (c) => {
        expectTypeOf(c.var.webhook).toEqualTypeOf<VerifiedDelivery>()
        expectTypeOf(c.get('webhook')).toEqualTypeOf<VerifiedDelivery>()
        delivered.push(c.var.webhook)
        return c.json({ received: c.get('webhook').id })
      })
      app.onError((err, c) => {
        caught.push(err)
        return err instanceof HTTPException ? err.getResponse() : c.json({ handled: true }, 500)
      })
      url = await start(app)
    })

    it('a valid delivery sets c.var.webhook and reaches the handler', async () => {
      const event = sampleEvent('message.received')
      const signed = await signWebhook({ secret: CASE_SECRET, event })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ received: signed.id })
      expect(delivered.at(-1)).toMatchObject({ id: signed.id, signatureVersion: 'v2', event })
    })

    it('a bad signature throws HTTPException 401 whose response is the core answer', async () => {
      const signed = await signWebhook({ secret: 'svc_whsec_wrong', event: sampleEvent('message.received') })
      const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(401)
      expect(await res.json()).toEqual({ ok: false, code: 'invalid_signature' })
      const err = caught.at(-1)
      expect(err).toBeInstanceOf(HTTPException)
      expect((err as HTTPException).status).toBe(401)
      expect(isWebhookVerificationError((err as HTTPException).cause)).toBe(true)
    })

    it('a body read before it throws HTTPException 500 whose response is the body_already_parsed answer', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await fetch(`${url}${CASE_PATH}/read-first`, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(500)
      expect(await res.json()).toEqual({ ok: false, code: 'body_already_parsed' })
      const err = caught.at(-1) as HTTPException
      expect(err).toBeInstanceOf(HTTPException)
      expect(err.cause).toMatchObject({ code: 'body_already_parsed', status: 500 })
      expect(err.message).toMatch(/webhooks\(\) first/)
    })

    it('an oversize chunked body throws HTTPException 413', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await postChunked(url + CASE_PATH, CASE_MAX_BODY_BYTES * 8, { ...signed.headers })
      expect(res.status).toBe(413)
      expect(res.json).toEqual({ ok: false, code: 'body_too_large' })
      expect((caught.at(-1) as HTTPException).status).toBe(413)
    })
  })

  it('receiver mode: oversize body streamed without Content-Length -> 413 body_too_large', async () => {
    const cases = createCaseApp()
    const app = new Hono()
    app.post(CASE_PATH, webhooks(cases.options))
    const url = await start(app)
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await postChunked(url + CASE_PATH, CASE_MAX_BODY_BYTES * 16, { ...signed.headers })
    expect(res.status).toBe(413)
    expect(res.json).toEqual({ ok: false, code: 'body_too_large' })
    expect(cases.record().attempts).toEqual({})
  })

  it('a body read before the middleware -> the JSON answer 500 body_already_parsed, logged with the fix, counted, handler not run', async () => {
    const cases = createCaseApp()
    const lines: string[] = []
    const results: unknown[] = []
    const caught: unknown[] = []
    const app = new Hono()
    const hook = webhooks({ ...cases.options, log: (line) => void lines.push(line), onResult: (result) => void results.push(result) })
    app.post(CASE_PATH, async (c, next) => {
      await c.req.raw.clone().text() // a clone is harmless
      await c.req.raw.text()
      await next()
    }, hook)
    app.onError((err, c) => {
      caught.push(err)
      return c.json({ handled: true }, 500)
    })
    const url = await start(app)
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(500)
    expect(await res.json()).toEqual({ ok: false, code: 'body_already_parsed' })
    expect(caught).toEqual([])
    expect(results).toMatchObject([{ outcome: 'refused', status: 500, code: 'body_already_parsed', id: signed.id }])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/500 body_already_parsed/)
    expect(lines[0]).toMatch(/webhooks\(\) first/)
    expect(lines[0]).not.toContain(CASE_SECRET)
    expect((await hook.stats()).codes).toMatchObject({ body_already_parsed: 1 })
    expect(cases.record().attempts).toEqual({})
  })

  it('invalid options throw when the middleware is created, in both modes', () => {
    expect(() => webhooks({ secret: '' })).toThrow(TypeError)
    expect(() => webhooks({ secret: '', on: {} })).toThrow(TypeError)
  })
})
