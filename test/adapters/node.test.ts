/**
 * svc-webhooks/node (`createNodeHandler`) on a real `http.createServer` on 127.0.0.1: the shared
 * case table, and an oversize body streamed without Content-Length.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest'
import { MemoryInbox } from 'svc-webhooks'
import { createNodeHandler } from 'svc-webhooks/node'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, createCaseApp, RUNS_PATH, tenantFromPath, variantFromPath } from '../support/case-app.js'
import { listen, postChunked, type RunningServer } from '../support/servers.js'

/**
 * The case app: the handler on CASE_PATH, the multi-tenant one on TENANT_ROUTE, one per variant
 * on VARIANT_ROUTE (the parsed-body one behind a listener that reads the whole stream first, as
 * a body-parsing middleware does), the runs record on RUNS_PATH, 404 elsewhere.
 */
function caseListener() {
  const cases = createCaseApp({ inbox: () => new MemoryInbox() })
  const handle = createNodeHandler(cases.options)
  // Many endpoints, one receiver: node:http has no router, the tenant is read from req.url.
  const tenants = createNodeHandler(cases.tenantOptions((req: IncomingMessage) => tenantFromPath(req.url)))
  const variants = cases.variants((options) => createNodeHandler(options))
  const parseFirst = async (req: IncomingMessage, res: ServerResponse) => {
    for await (const _chunk of req);
    return variants['parsed-body'](req, res)
  }
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === CASE_PATH) return void handle(req, res)
    if (tenantFromPath(req.url) !== undefined) return void tenants(req, res)
    const variant = variantFromPath(req.url)
    if (variant === 'parsed-body') return void parseFirst(req, res)
    if (variant !== undefined) return void variants[variant](req, res)
    if (req.url === RUNS_PATH) return void res.writeHead(200, { 'content-type': 'application/json' }).end(cases.runsJson())
    res.writeHead(404).end()
  }
  return { cases, listener }
}

describeCaseTable('node:http', async () => httpTransport(await listen(caseListener().listener)))

describe('svc-webhooks/node', () => {
  let server: RunningServer
  const { cases, listener } = caseListener()
  afterAll(async () => {
    await server?.close()
  })

  it('has the (req, res) => Promise<void> signature http.createServer takes, and stats() for a health endpoint', async () => {
    expectTypeOf(createNodeHandler).returns.toMatchTypeOf<(req: IncomingMessage, res: ServerResponse) => Promise<void>>()
    const handle = createNodeHandler({ secret: CASE_SECRET, on: {}, log: false })
    expect(await handle.stats()).toEqual({ answers: {}, codes: {}, consecutiveFailures: 0 })
  })

  it('oversize body streamed without Content-Length -> 413 body_too_large, server keeps serving', async () => {
    server = await listen(listener)
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await postChunked(server.url + CASE_PATH, CASE_MAX_BODY_BYTES * 16, { ...signed.headers })
    expect(res.status).toBe(413)
    expect(res.json).toEqual({ ok: false, code: 'body_too_large' })
    expect(cases.record().attempts).toEqual({})
    const ok = await fetch(server.url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(ok.status).toBe(200)
    expect(cases.record().runs).toEqual({ [signed.id]: 1 })
  })

  it('invalid options throw when the handler is created', () => {
    expect(() => createNodeHandler({ secret: '', on: {} })).toThrow(TypeError)
  })
})
