/**
 * The default log under hostile traffic, on every Node server entry (Express, Fastify, node:http,
 * Hono on @hono/node-server) over real HTTP on 127.0.0.1. The URL is public, so anyone can make
 * the receiver refuse: 2,000 forged deliveries write one line and, once the window ends, one
 * summary with the count; a refusal of another code right after is written at once; forged
 * traffic raises no failing-streak warning; and an endpoint name taken from the URL cannot forge
 * a line (`%0A`, U+2028) or grow one without bound. The window runs on the receiver's `now`,
 * moved forward by the test: no test waits for it.
 */
import { getRequestListener } from '@hono/node-server'
import express, { type Request } from 'express'
import Fastify, { type FastifyRequest } from 'fastify'
import { Hono, type Context } from 'hono'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { WebhookReceiverOptions } from 'svc-webhooks'
import { webhooks as expressWebhooks } from 'svc-webhooks/express'
import { webhooksPlugin } from 'svc-webhooks/fastify'
import { webhooks as honoWebhooks } from 'svc-webhooks/hono'
import { createNodeHandler } from 'svc-webhooks/node'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { listen, type RunningServer } from '../support/servers.js'

const SECRET = 'svc_whsec_LogFloodTestSecret'
const TENANT_SECRETS: Record<string, string> = { 'shop-a': 'svc_whsec_ShopA' }
const FORGED = 2000
const CONNECTIONS = 16

/** What every server gets: a clock the test moves, and a log the test reads. */
interface Setup {
  lines: string[]
  /** Options of the single-endpoint route, /webhooks/svc. */
  single: WebhookReceiverOptions
  /** Options of the tenant route, /tenants/:tenant/webhooks, given how the entry reads the tenant. */
  tenants: <R>(tenantOf: (request: R) => string | undefined) => WebhookReceiverOptions<R>
  advance: (ms: number) => void
}

function setup(): Setup {
  const lines: string[] = []
  // Stands still unless moved, so a slow machine cannot end a window mid-flood; the deliveries'
  // timestamps (wall clock) stay well inside the tolerance.
  let at = Date.now()
  const common = { now: () => at, log: (line: string) => void lines.push(line), on: { 'message.received': () => {} } }
  return {
    lines,
    single: { ...common, secret: SECRET },
    tenants: (tenantOf) => ({
      ...common,
      secret: (request) => TENANT_SECRETS[tenantOf(request) ?? ''],
      endpoint: (request) => tenantOf(request) ?? '',
    }),
    advance: (ms) => void (at += ms),
  }
}

/** Each Node server entry, with the tenant read from the URL the way that framework decodes it. */
const SERVERS: Record<string, (s: Setup) => Promise<RunningServer>> = {
  express: (s) => {
    const app = express()
    app.post('/webhooks/svc', expressWebhooks(s.single))
    app.post('/tenants/:tenant/webhooks', expressWebhooks(s.tenants((req: Request) => req.params.tenant as string | undefined)))
    return listen(app)
  },
  fastify: async (s) => {
    // Fastify answers 414 for a parameter over 100 characters by default: raised, so the cap is ours to show.
    const app = Fastify({ maxParamLength: 5000 })
    app.register(webhooksPlugin, { path: '/webhooks/svc', ...s.single })
    app.register(webhooksPlugin, { path: '/tenants/:tenant/webhooks', ...s.tenants((request: FastifyRequest) => (request.params as { tenant?: string }).tenant) })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    return { url, close: () => app.close() }
  },
  'node:http': (s) => {
    const single = createNodeHandler(s.single)
    // node:http has no router: the tenant is the decoded path segment.
    const tenantOf = (req: IncomingMessage) => {
      const match = /^\/tenants\/([^/]+)\/webhooks$/.exec(req.url ?? '')
      return match ? decodeURIComponent(match[1]!) : undefined
    }
    const tenants = createNodeHandler(s.tenants(tenantOf))
    return listen((req: IncomingMessage, res: ServerResponse) => {
      if (req.url === '/webhooks/svc') return void single(req, res)
      if (tenantOf(req) !== undefined) return void tenants(req, res)
      res.writeHead(404).end()
    })
  },
  'hono on @hono/node-server': (s) => {
    const app = new Hono()
    app.post('/webhooks/svc', honoWebhooks(s.single as WebhookReceiverOptions<Context> & { on: object }))
    app.post('/tenants/:tenant/webhooks', honoWebhooks(s.tenants((c: Context) => c.req.param('tenant')) as WebhookReceiverOptions<Context> & { on: object }))
    return listen(getRequestListener(app.fetch))
  },
}

/** Sends `count` forged deliveries (well-formed, fresh, signed with a secret the server lacks) from CONNECTIONS connections. */
async function flood(url: string, count: number): Promise<Record<number, number>> {
  const forged = await signWebhook({ secret: 'svc_whsec_NotTheServersSecret', event: sampleEvent('message.received') })
  const statuses: Record<number, number> = {}
  let next = 0
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < count) {
        const n = next++
        const headers = { ...forged.headers, 'svc-webhook-id': `forged-${n}`, 'svc-webhook-timestamp': String(Math.floor(Date.now() / 1000)) }
        const res = await fetch(url, { method: 'POST', headers, body: forged.body })
        await res.arrayBuffer()
        statuses[res.status] = (statuses[res.status] ?? 0) + 1
      }
    }),
  )
  return statuses
}

for (const [name, start] of Object.entries(SERVERS)) {
  describe(`${name}: the default log under forged traffic`, () => {
    const s = setup()
    let server: RunningServer
    beforeAll(async () => {
      server = await start(s)
    })
    afterAll(async () => {
      await server?.close()
    })

    it('2,000 forged deliveries write one line, then one summary with the count; another code right after is written at once', async () => {
      s.lines.length = 0
      expect(await flood(`${server.url}/webhooks/svc`, FORGED)).toEqual({ 401: FORGED })
      expect(s.lines).toHaveLength(1)
      expect(s.lines[0]).toMatch(/^svc-webhooks: 401 invalid_signature \(delivery forged-\d+\): No v2 signature matched/)

      // A different refusal inside the same window: written at once, not folded into the flood.
      const unsigned = await fetch(`${server.url}/webhooks/svc`, { method: 'POST', headers: { 'svc-webhook-id': 'after-flood' }, body: '{}' })
      expect(unsigned.status).toBe(400)
      expect(s.lines).toHaveLength(2)
      expect(s.lines[1]).toMatch(/^svc-webhooks: 400 missing_timestamp \(delivery after-flood\)/)

      // The window ends: the next line of any kind brings the summary first.
      s.advance(10_000)
      expect((await flood(`${server.url}/webhooks/svc`, 1))[401]).toBe(1)
      expect(s.lines).toHaveLength(4)
      expect(s.lines[2]).toMatch(/^svc-webhooks: 401 invalid_signature: 1,999 more in the last 10 s, delivery ids (?:forged-\d+ ){249}forged-\d+ \(and 1,749 not listed\)\. Each one is counted in stats\(\) and passed to onResult\.$/)
      expect(s.lines[3]).toMatch(/^svc-webhooks: 401 invalid_signature \(delivery forged-0\)/)
      expect(s.lines.join('\n')).not.toMatch(/failing answers in a row/)
    })

    it('made-up tenants in the URL share one window, and a name from the URL cannot forge or stretch a line', async () => {
      s.lines.length = 0
      s.advance(10_000)
      const forgedLine = 'svc-webhooks: 200 processed (delivery planted-by-attacker)'
      const names = [`x\n${forgedLine}`, `y\r\n${forgedLine}`, `z\u2028${forgedLine}`, `w\u001b[2K${'A'.repeat(3000)}`]
      for (let i = 0; i < 40; i++) {
        const tenant = `${names[i % names.length]}-${i}`
        const res = await fetch(`${server.url}/tenants/${encodeURIComponent(tenant)}/webhooks`, { method: 'POST', headers: { 'svc-webhook-id': `made-up-${i}` }, body: '{}' })
        expect(res.status).toBe(400)
      }
      // One line for 40 made-up tenants: their names open no windows of their own.
      expect(s.lines).toHaveLength(1)
      const [line] = s.lines as [string]
      expect(line).toMatch(/^svc-webhooks: 400 missing_timestamp \(delivery made-up-0, endpoint x\\nsvc-webhooks: 200 processed/)
      expect(line).not.toMatch(/[\n\r\u2028\u2029]/)
      expect(line).not.toContain('\u001b')
      s.advance(10_000)
      await fetch(`${server.url}/tenants/${encodeURIComponent(names[3]!)}/webhooks`, { method: 'POST', headers: { 'svc-webhook-id': 'made-up-last' }, body: '{}' })
      expect(s.lines).toHaveLength(3)
      expect(s.lines[1]).toBe(`svc-webhooks: 400 missing_timestamp: 39 more in the last 10 s, delivery ids ${Array.from({ length: 39 }, (_, i) => `made-up-${i + 1}`).join(' ')}. Each one is counted in stats() and passed to onResult.`)
      for (const written of s.lines) {
        expect(written).not.toMatch(/[\n\r\u2028\u2029]/)
        expect(written).not.toContain('\u001b')
        expect(written.length).toBeLessThan(600)
        expect(written).not.toContain('A'.repeat(100))
      }
    })
  })
}
