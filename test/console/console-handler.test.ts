/**
 * The console's Fetch handler mounted where docs/console.md says (Hono on @hono/node-server,
 * Fastify with its scoped parser, node:http through toNodeHandler), on real servers on 127.0.0.1,
 * and its refusals and outages: an engine that fails or hangs is a 503 page, never a throw.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { serve } from '@hono/node-server'
import { MemoryHistory } from 'svc-webhooks/history'
import { createConsole, toNodeHandler } from 'svc-webhooks/console'
import { createInboxWorker, MemoryInbox, type WebhookHistory } from 'svc-webhooks'
import { listen, type RunningServer } from '../support/servers.js'

const TOKEN = 'Bearer console-test'
const authorize = (request: Request) => request.headers.get('authorization') === TOKEN

function seeded(): MemoryHistory {
  const history = new MemoryHistory({ keepBodies: true, log: false })
  history.record({ id: 'evt_1', endpoint: 'default', at: Date.now(), outcome: 'failed', status: 500, code: 'handler_failed', delivered: true, addAttempt: true, error: { name: 'Error', message: 'boom' }, body: '{"event":"message.received"}' })
  return history
}

/** GETs the entry page for its token, then POSTs a replay with it. */
async function replayThrough(base: string): Promise<number> {
  const page = await (await fetch(`${base}/entry?id=evt_1`, { headers: { authorization: TOKEN } })).text()
  const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(page)?.[1]
  expect(csrf).toBeDefined()
  const res = await fetch(`${base}/action`, {
    method: 'POST',
    headers: { authorization: TOKEN, origin: new URL(base).origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf: csrf!, do: 'replay', id: 'evt_1', endpoint: 'default' }).toString(),
  })
  await res.text()
  return res.status
}

describe('mounted', () => {
  const servers: RunningServer[] = []
  let runs = 0
  const make = () => {
    const history = seeded()
    return createConsole({ authorize, history, receiver: { stats: async () => ({ answers: {}, codes: {}, consecutiveFailures: 0 }), replay: (id, endpoint) => history.replay({ handlers: { 'message.received': () => void runs++ }, now: Date.now }, id, endpoint) } })
  }
  beforeAll(async () => {
    const hono = new Hono()
    const ops = make()
    hono.all('/admin/webhooks/*', (c) => ops(c.req.raw))
    hono.all('/admin/webhooks', (c) => ops(c.req.raw))
    const honoServer = serve({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => honoServer.once('listening', resolve))
    servers.push({ url: `http://127.0.0.1:${(honoServer.address() as { port: number }).port}`, close: () => new Promise<void>((r) => honoServer.close(() => r())) })

    const fastify = Fastify()
    const handle = toNodeHandler(make())
    await fastify.register(async (scope) => {
      scope.removeAllContentTypeParsers()
      scope.addContentTypeParser('*', (_request, _payload, done) => done(null))
      scope.all('/admin/webhooks', (request, reply) => { reply.hijack(); return handle(request.raw, reply.raw) })
      scope.all('/admin/webhooks/*', (request, reply) => { reply.hijack(); return handle(request.raw, reply.raw) })
    })
    await fastify.listen({ port: 0, host: '127.0.0.1' })
    servers.push({ url: `http://127.0.0.1:${(fastify.server.address() as { port: number }).port}`, close: () => fastify.close() })

    const node = toNodeHandler(make())
    servers.push(await listen(createServer((req, res) => void node(req, res))))
  })
  afterAll(async () => {
    for (const s of servers) await s.close()
  })

  for (const [i, name] of ['Hono', 'Fastify', 'node:http'].entries()) {
    it(`${name}: redirects the mount point, serves the pages, replays through a guarded POST`, async () => {
      const base = `${servers[i]!.url}/admin/webhooks`
      const bare = await fetch(base, { headers: { authorization: TOKEN }, redirect: 'manual' })
      expect(bare.status).toBe(308)
      expect(bare.headers.get('location')).toBe('/admin/webhooks/')
      for (const page of ['/', '/history', '/refusals', '/dead', '/entry?id=evt_1']) {
        const res = await fetch(`${base}${page}`, { headers: { authorization: TOKEN } })
        expect(res.status, page).toBe(200)
        expect(res.headers.get('content-security-policy')).toMatch(/default-src 'none'/)
        await res.text()
      }
      const before = runs
      expect(await replayThrough(base)).toBe(200)
      expect(runs - before).toBe(1)
      expect((await fetch(`${base}/history`)).status).toBe(403)
    })
  }
})

describe('toNodeHandler reads a form body as the receiver reads a delivery', () => {
  let server: RunningServer
  /** Form posts the handler was given. */
  let pages = 0
  beforeAll(async () => {
    const node = toNodeHandler(async (request) => (request.method === 'POST' && pages++, new Response('ok')), { bodyTimeoutMs: 300 })
    server = await listen(createServer((req, res) => void node(req, res)))
  })
  afterAll(() => server.close())

  it('a body over 16 KiB is 413 before the handler runs, and the server keeps serving', async () => {
    const res = await fetch(`${server.url}/action`, { method: 'POST', body: 'x'.repeat(20 * 1024) })
    expect(res.status).toBe(413)
    expect(pages).toBe(0)
    expect((await fetch(`${server.url}/`)).status).toBe(200)
  })

  it('a body that stops arriving is abandoned at bodyTimeoutMs and answered 503, not held open', async () => {
    const { port } = new URL(server.url)
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => socket.write('POST /action HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\ncsrf='))
      let text = ''
      socket.on('data', (chunk) => (text += chunk.toString('latin1')))
      socket.on('close', () => resolve(text))
      socket.on('error', reject)
      setTimeout(() => (socket.destroy(), resolve(text)), 5000).unref()
    })
    expect(answer).toMatch(/^HTTP\/1\.1 503/)
    expect(pages).toBe(0)
  })

  it('refuses a bodyTimeoutMs it cannot use', () => {
    for (const bodyTimeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => toNodeHandler(async () => new Response(), { bodyTimeoutMs }), String(bodyTimeoutMs)).toThrow(/bodyTimeoutMs/)
    }
  })
})

describe('refusals and outages', () => {
  const call = (handler: (r: Request) => Promise<Response>, path: string, init: RequestInit = {}) => handler(new Request(`http://127.0.0.1/ops${path}`, init))

  it('authorize: a throw is a 401, a Response keeps only its status and challenge, anything but true is a 403', async () => {
    const throwing = createConsole({ authorize: () => { throw new Error('sso down') } })
    const res = await call(throwing, '/')
    expect(res.status).toBe(401)
    expect(await res.text()).toBe('Unauthorized')
    const challenge = createConsole({ authorize: () => new Response('<h1>secret page</h1>', { status: 401, headers: { 'www-authenticate': 'Basic realm="x"', 'x-leak': '1' } }) })
    const asked = await call(challenge, '/history')
    expect(asked.status).toBe(401)
    expect(asked.headers.get('www-authenticate')).toBe('Basic realm="x"')
    expect(asked.headers.get('x-leak')).toBeNull()
    expect(await asked.text()).not.toContain('secret page')
    const truthy = createConsole({ authorize: () => 'yes' as never })
    expect((await call(truthy, '/')).status).toBe(403)
  })

  it('refuses a timeoutMs that is not a positive finite number at construction (Infinity would make every page a 503)', () => {
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
      expect(() => createConsole({ authorize: () => true, timeoutMs: timeoutMs as never }), String(timeoutMs)).toThrow(/`timeoutMs` must be a positive number of milliseconds/)
    }
  })

  it('a page link with a cursor no page returned is a 400 naming it, not an outage', async () => {
    const res = await call(createConsole({ authorize: () => true, history: seeded() }), '/history?cursor=not-a-cursor')
    expect(res.status).toBe(400)
    expect(await res.text()).toContain('That page link is not valid any more.')
  })

  it('an engine that fails or hangs while a page renders or an action runs is a 503 page', async () => {
    const failing = { ...seeded(), list: () => Promise.reject(new Error('ECONNREFUSED 10.0.0.7:6379 password=hunter2')), size: () => Promise.reject(new Error('down')), refusals: () => new Promise(() => undefined), get: () => Promise.reject(new Error('down')) } as unknown as WebhookHistory
    const inbox = { stats: () => Promise.reject(new Error('down')), dead: () => new Promise(() => undefined), requeue: () => Promise.reject(new Error('down')), purge: () => Promise.reject(new Error('down')) }
    const handler = createConsole({ authorize: () => true, history: failing, inbox: inbox as never, timeoutMs: 100 })
    for (const path of ['/', '/history', '/history?cursor=WyJ4Il0', '/refusals', '/dead', '/entry?id=x']) {
      const res = await call(handler, path)
      expect(res.status, path).toBe(503)
      const text = await res.text()
      expect(text).toContain('Unavailable')
      expect(text).not.toContain('hunter2')
    }
    // A replayer, so the entry page has a form (and a token).
    const receiver = { stats: async () => ({ answers: {}, codes: {}, consecutiveFailures: 0 }), replay: () => Promise.reject(new Error('down')) }
    const page = await (await createConsole({ authorize: () => true, history: seeded(), receiver, inbox: inbox as never, timeoutMs: 100 })(new Request('http://127.0.0.1/ops/entry?id=evt_1'))).text()
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(page)![1]!
    const acting = createConsole({ authorize: () => true, history: seeded(), receiver, inbox: inbox as never, timeoutMs: 100 })
    // Another console draws another key: its token is refused, then with a shared csrfSecret it is not.
    expect((await call(acting, '/action', { method: 'POST', headers: { origin: 'http://127.0.0.1' }, body: new URLSearchParams({ csrf, do: 'requeue', key: 'k' }) })).status).toBe(403)
    const shared = (secret: string) => createConsole({ authorize: () => true, history: seeded(), receiver, inbox: inbox as never, timeoutMs: 100, csrfSecret: secret })
    const one = shared('s3cret-shared-by-every-process')
    const token = /name="csrf" value="([0-9a-f]{64})"/.exec(await (await call(one, '/entry?id=evt_1')).text())![1]!
    const res = await call(shared('s3cret-shared-by-every-process'), '/action', { method: 'POST', headers: { origin: 'http://127.0.0.1' }, body: new URLSearchParams({ csrf: token, do: 'requeue', key: 'k' }) })
    expect(res.status).toBe(503)
    // A replay whose engine fails: a 503 page too.
    const replayed = await call(one, '/action', { method: 'POST', headers: { origin: 'http://127.0.0.1' }, body: new URLSearchParams({ csrf: token, do: 'replay', id: 'evt_1' }) })
    expect(replayed.status).toBe(503)
  })
})

describe('flow controls', () => {
  it('a worker with pause() and resume() gets the buttons, and they pause and resume every worker', async () => {
    const inbox = new MemoryInbox()
    const worker = createInboxWorker({ inbox, on: {}, log: false })
    const handler = createConsole({ authorize: () => true, worker })
    const overview = await (await handler(new Request('http://127.0.0.1/ops/'))).text()
    expect(overview).toContain('data-action="pause"')
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(overview)![1]!
    const post = (what: string) => handler(new Request('http://127.0.0.1/ops/action', { method: 'POST', headers: { origin: 'http://127.0.0.1' }, body: new URLSearchParams({ csrf, do: what }) }))
    expect((await post('pause')).status).toBe(200)
    expect((await inbox.stats()).paused).toBe(true)
    expect(await (await handler(new Request('http://127.0.0.1/ops/'))).text()).toContain('data-action="resume"')
    expect((await post('resume')).status).toBe(200)
    expect((await inbox.stats()).paused).toBe(false)
  })
})
