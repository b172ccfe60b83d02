/**
 * `svc-webhooks/fetch` served over real HTTP on 127.0.0.1 by Node through @hono/node-server's
 * `serve({ fetch })` (a node:http -> Request bridge): the shared case table for both forms,
 * createFetchHandler and handleRequest, and once more in process (the handler called with a
 * `Request`, no server); then the Fetch-only details (streamed size limit, verify-only,
 * toResponse). Bun and Deno serve the same handler in test/runtimes (`npm run test:runtimes`).
 */
import type { AddressInfo } from 'node:net'
import { serve, type ServerType } from '@hono/node-server'
import { afterAll, describe, expect, it } from 'vitest'
import { isWebhookVerificationError, MemoryInbox } from 'svc-webhooks'
import { createFetchHandler, handleRequest, toResponse, verifyRequest } from 'svc-webhooks/fetch'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, fetchTransport, httpTransport, type CaseTransport } from '../support/case-table.js'
import { createCaseApp, CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, RUNS_PATH, tenantFromPath, variantFromPath, type CaseApp } from '../support/case-app.js'

const servers: ServerType[] = []

function close(server: ServerType): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}

afterAll(async () => {
  await Promise.all(servers.map(close))
})

/** Serves `fetch` on 127.0.0.1, on a free port. */
async function listen(fetch: (request: Request) => Response | Promise<Response>): Promise<string> {
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
  })
  servers.push(server)
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/**
 * The CASE_APP contract as one Fetch handler: the webhook route, the multi-tenant route (the
 * tenant read from the request's URL path: a Fetch handler has no router), the variant routes
 * (the parsed-body one after `request.json()`) and the runs record.
 */
function caseFetchApp(app: CaseApp, form: 'createFetchHandler' | 'handleRequest'): (request: Request) => Promise<Response> {
  const options = app.options
  const tenantOptions = app.tenantOptions((request: Request) => tenantFromPath(new URL(request.url).pathname))
  const webhook = form === 'createFetchHandler' ? createFetchHandler(options) : (request: Request) => handleRequest(request, options)
  const tenants = form === 'createFetchHandler' ? createFetchHandler(tenantOptions) : (request: Request) => handleRequest(request, tenantOptions)
  const variants = app.variants((options) =>
    form === 'createFetchHandler' ? createFetchHandler(options) : (request: Request) => handleRequest(request, options),
  )
  return async (request) => {
    const { pathname } = new URL(request.url)
    if (pathname === CASE_PATH) return webhook(request)
    if (tenantFromPath(pathname) !== undefined) return tenants(request)
    const variant = variantFromPath(pathname)
    // The parsed-body variant: the app read the body first (request.json()).
    if (variant === 'parsed-body') await request.json()
    if (variant !== undefined) return variants[variant](request)
    if (pathname === RUNS_PATH) return new Response(app.runsJson(), { headers: { 'content-type': 'application/json' } })
    return new Response('not found', { status: 404 })
  }
}

async function startCaseApp(form: 'createFetchHandler' | 'handleRequest'): Promise<CaseTransport> {
  return httpTransport({ url: await listen(caseFetchApp(createCaseApp({ inbox: () => new MemoryInbox() }), form)) })
}

describeCaseTable('fetch: createFetchHandler on node:http (@hono/node-server)', () => startCaseApp('createFetchHandler'))
describeCaseTable('fetch: handleRequest on node:http (@hono/node-server)', () => startCaseApp('handleRequest'))
describeCaseTable('fetch: createFetchHandler, in process', async () => {
  const app = createCaseApp({ inbox: () => new MemoryInbox() })
  return fetchTransport(caseFetchApp(app, 'createFetchHandler'), app)
})

describe('fetch: details of the Web-standard entry', () => {
  const app = createCaseApp()
  let url: string
  const ready = listen(createFetchHandler(app.options)).then((u) => (url = u))

  it('a chunked body (no Content-Length) over the limit -> 413 while streaming', async () => {
    await ready
    const signed = await signWebhook({ secret: CASE_SECRET, body: `{"event":"x","pad":"${'x'.repeat(CASE_MAX_BODY_BYTES)}"}` })
    const chunk = new TextEncoder().encode('x'.repeat(16 * 1024))
    let sent = 0
    // Bounded: stops after the limit plus a few chunks even if the server kept reading.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > CASE_MAX_BODY_BYTES * 4) return controller.close()
        sent += chunk.byteLength
        controller.enqueue(chunk)
      },
    })
    const res = await fetch(url, { method: 'POST', body, headers: signed.headers, duplex: 'half' } as RequestInit)
    expect(res.status).toBe(413)
    expect(await res.json()).toEqual({ ok: false, code: 'body_too_large' })
  })

  it('a declared Content-Length over the limit -> 413', async () => {
    const request = new Request('http://127.0.0.1/webhooks/svc', {
      method: 'POST',
      headers: { 'content-length': String(CASE_MAX_BODY_BYTES + 1) },
      body: 'small',
    })
    const res = await createFetchHandler(app.options)(request)
    expect(res.status).toBe(413)
  })

  it('a Request built in-process whose Content-Length lies -> 413, read no further than the limit', async () => {
    // A decompressing middleware, say: the declared length is the compressed one. Over HTTP the
    // server's parser stops the body at Content-Length; in process nothing does, and
    // `arrayBuffer()` would buffer all of it.
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const chunk = new Uint8Array(16 * 1024).fill(0x20)
    let pulled = 0
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled > CASE_MAX_BODY_BYTES * 8) return controller.close() // bounded if the reader never stopped
        pulled += chunk.byteLength
        controller.enqueue(chunk)
      },
    })
    const request = new Request('http://127.0.0.1/webhooks/svc', {
      method: 'POST',
      headers: { ...signed.headers, 'content-length': '100' },
      body,
      duplex: 'half',
    } as RequestInit)
    const res = await createFetchHandler(app.options)(request)
    expect(res.status).toBe(413)
    expect(await res.json()).toEqual({ ok: false, code: 'body_too_large' })
    // The stream's queue may run a chunk or two ahead of the reader, no more.
    expect(pulled).toBeLessThanOrEqual(CASE_MAX_BODY_BYTES + 3 * chunk.byteLength)
  })

  it('non-ASCII bytes reach the handler exactly as sent', async () => {
    await ready
    let seen: Uint8Array | undefined
    const spy = createFetchHandler({ ...app.options, on: { 'message.received': (_e, d) => void (seen = d.rawBody) } })
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await spy(new Request(url, { method: 'POST', body: signed.rawBody as BodyInit, headers: signed.headers }))
    expect(res.status).toBe(200)
    expect(seen).toEqual(signed.rawBody)
  })

  it('handleRequest keeps one receiver per options object (a resend is a duplicate)', async () => {
    const options = createCaseApp().options
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const request = () => new Request('http://127.0.0.1/webhooks/svc', { method: 'POST', body: signed.body, headers: signed.headers })
    expect(await (await handleRequest(request(), options)).json()).toEqual({ ok: true })
    expect(await (await handleRequest(request(), options)).json()).toEqual({ ok: true, duplicate: true })
  })

  it('verifyRequest returns the delivery, or throws the code', async () => {
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const request = (body: string) => new Request('http://127.0.0.1/', { method: 'POST', body, headers: signed.headers })
    const delivery = await verifyRequest(request(signed.body), { secret: CASE_SECRET })
    expect(delivery).toMatchObject({ id: signed.id, signatureVersion: 'v2', event: { event: 'message.received' } })
    const error = await verifyRequest(request(`${signed.body} `), { secret: CASE_SECRET }).catch((e: unknown) => e)
    expect(isWebhookVerificationError(error) && error.code).toBe('invalid_signature')
  })

  it('toResponse copies status, headers and body', async () => {
    const res = toResponse({ status: 429, headers: { 'retry-after': '5', 'content-type': 'application/json' }, body: '{"ok":false}' })
    expect(res.status).toBe(429)
    expect(res.headers.get('retry-after')).toBe('5')
    expect(await res.text()).toBe('{"ok":false}')
  })
})
