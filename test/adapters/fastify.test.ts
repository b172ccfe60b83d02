/**
 * svc-webhooks/fastify on a real Fastify server on 127.0.0.1: the shared case table, the plugin's
 * parser staying inside its context (other routes keep JSON parsing), and oversize bodies refused
 * by Fastify's own bodyLimit answered like the core.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MemoryInbox } from 'svc-webhooks'
import webhooksDefault, { webhooksPlugin } from 'svc-webhooks/fastify'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, createCaseApp, RUNS_PATH, TENANT_ROUTE, variantPath, VARIANTS } from '../support/case-app.js'
import { postChunked } from '../support/servers.js'

async function start(app: FastifyInstance) {
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, close: () => app.close() }
}

function caseApp() {
  const cases = createCaseApp({ inbox: () => new MemoryInbox() })
  const app = Fastify()
  app.register(webhooksPlugin, { path: CASE_PATH, ...cases.options })
  // Many endpoints, one receiver: the tenant from Fastify's own route params.
  app.register(webhooksPlugin, { path: TENANT_ROUTE, ...cases.tenantOptions((request: FastifyRequest) => (request.params as { tenant?: string }).tenant) })
  // The variant routes, one receiver each on its own path. The plugin answers in its route's
  // onRequest hook, before Fastify runs any body parser (`parsed-body` lacking).
  for (const variant of VARIANTS) {
    if (variant !== 'parsed-body') app.register(webhooksPlugin, { path: variantPath(variant), ...cases.variantOptions(variant) })
  }
  app.get(RUNS_PATH, async (_request, reply) => reply.type('application/json').send(cases.runsJson()))
  app.post('/json', async (request) => ({ parsed: request.body }))
  return { cases, app }
}

describeCaseTable('fastify', async () => httpTransport(await start(caseApp().app)), {
  lacks: { 'parsed-body': "the plugin answers in onRequest, before Fastify runs any content-type parser" },
})

describe('svc-webhooks/fastify', () => {
  const { cases, app } = caseApp()
  let url: string
  afterAll(async () => {
    await app.close()
  })

  beforeAll(async () => {
    url = (await start(app)).url
  })

  it('the default export is the plugin', () => {
    expect(webhooksDefault).toBe(webhooksPlugin)
  })

  it('other routes of the app keep parsing JSON', async () => {
    const res = await fetch(url + '/json', { method: 'POST', body: '{"a":[1,"é"]}', headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ parsed: { a: [1, 'é'] } })
  })

  it('oversize body with Content-Length -> 413 body_too_large, as the core answers', async () => {
    const signed = await signWebhook({ secret: CASE_SECRET, body: 'x'.repeat(CASE_MAX_BODY_BYTES + 1) })
    const res = await fetch(url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(413)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await res.json()).toEqual({ ok: false, code: 'body_too_large' })
  })

  it('oversize body streamed without Content-Length -> 413 body_too_large', async () => {
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await postChunked(url + CASE_PATH, CASE_MAX_BODY_BYTES * 16, { ...signed.headers })
    expect(res.status).toBe(413)
    expect(res.json).toEqual({ ok: false, code: 'body_too_large' })
    expect(cases.record().attempts).toEqual({})
  })

  it('a delivery with no content-type is still verified from its raw bytes', async () => {
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const { 'content-type': _, ...headers } = signed.headers
    const res = await fetch(url + CASE_PATH, { method: 'POST', body: new TextEncoder().encode(signed.body), headers })
    expect(res.status).toBe(200)
    expect(cases.record().runs[signed.id]).toBe(1)
  })

  it("the app's onSend hooks run on the webhook route, for answers and refusals", async () => {
    const hooked = Fastify()
    hooked.addHook('onSend', async (_request, reply, payload) => {
      reply.header('x-app-hook', 'ran')
      return payload
    })
    hooked.register(webhooksPlugin, { path: CASE_PATH, ...createCaseApp().options })
    const server = await start(hooked)
    try {
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const ok = await fetch(server.url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(ok.status).toBe(200)
      expect(ok.headers.get('x-app-hook')).toBe('ran')
      expect(ok.headers.get('content-type')).toMatch(/^application\/json/)
      const refused = await fetch(server.url + CASE_PATH, { method: 'POST', body: signed.body, headers: { 'content-type': 'application/json' } })
      expect(refused.status).toBe(400)
      expect(refused.headers.get('x-app-hook')).toBe('ran')
      expect(await refused.json()).toEqual({ ok: false, code: 'missing_id' })
    } finally {
      await server.close()
    }
  })

  it('invalid options fail registration', async () => {
    const bad = Fastify()
    bad.register(webhooksPlugin, { secret: '', on: {} })
    await expect(bad.ready()).rejects.toThrow(TypeError)
    await bad.close()
  })
})
