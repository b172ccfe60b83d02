/**
 * Verify-only mode is not silent, on every adapter that has it (Express, Hono): a refused
 * delivery leaves the same line receiver mode writes (code, delivery id, what to fix; never the
 * body or the secret), repeats of a code within the window are counted into one summary, `log`
 * replaces the line's destination and `log: false` silences it.
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { Hono } from 'hono'
import { webhooks as expressWebhooks } from 'svc-webhooks/express'
import { webhooks as honoWebhooks } from 'svc-webhooks/hono'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { afterEach, describe, expect, it, vi } from 'vitest'

const secret = 'svc_whsec_verify_only_log'
const other = 'svc_whsec_someone_else'

type Send = (headers: Record<string, string>, body: string) => Promise<number>

/** Each adapter's verify-only route behind `send`, with `log` as given. */
const ADAPTERS: Record<string, (log: ((line: string) => void) | false | undefined) => Promise<{ send: Send; close: () => void }>> = {
  express: async (log) => {
    const app = express()
    app.post('/webhooks/svc', expressWebhooks({ secret, ...(log === undefined ? {} : { log }) }), (_req, res) => void res.json({ ok: true }))
    app.use((err: { status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(err.status ?? 500).end())
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/svc`
    return { send: async (headers, body) => (await fetch(url, { method: 'POST', headers, body })).status, close: () => server.close() }
  },
  hono: async (log) => {
    const app = new Hono()
    app.post('/webhooks/svc', honoWebhooks({ secret, ...(log === undefined ? {} : { log }) }), (c) => c.json({ ok: true }))
    return { send: async (headers, body) => (await app.request('/webhooks/svc', { method: 'POST', headers, body })).status, close: () => {} }
  },
}

afterEach(() => vi.restoreAllMocks())

describe.each(Object.keys(ADAPTERS))('%s verify-only mode', (name) => {
  it('logs one line per refusal code, with the delivery id and the fix; repeats are counted, not written', async () => {
    const lines: string[] = []
    const { send, close } = await ADAPTERS[name]!((line) => lines.push(line))
    try {
      const forged = await Promise.all([1, 2, 3, 4, 5].map(() => signWebhook({ secret: other, event: sampleEvent('message.received') })))
      for (const d of forged) expect(await send(d.headers, d.body)).toBe(401)
      const good = await signWebhook({ secret, event: sampleEvent('message.received') })
      expect(await send(good.headers, good.body)).toBe(200)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(`^svc-webhooks: 401 invalid_signature \\(delivery ${forged[0]!.id}\\): `))
      expect(lines[0]).not.toContain(secret)
      expect(lines[0]).not.toContain(forged[0]!.body)
      const stale = await signWebhook({ secret, event: sampleEvent('message.received'), timestamp: Math.floor(Date.now() / 1000) - 3600 })
      expect(await send(stale.headers, stale.body)).toBe(401)
      expect(lines).toHaveLength(2) // another code: written at once
      expect(lines[1]).toMatch(/^svc-webhooks: 401 timestamp_too_old/)
    } finally {
      close()
    }
  })

  it('writes to console.warn by default, and nothing with log: false', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    const forged = await signWebhook({ secret: other, event: sampleEvent('message.received') })
    const loud = await ADAPTERS[name]!(undefined)
    try {
      expect(await loud.send(forged.headers, forged.body)).toBe(401)
    } finally {
      loud.close()
    }
    expect(warn.mock.calls.map((c) => String(c[0])).filter((l) => l.includes('401 invalid_signature'))).toHaveLength(1)
    warn.mockClear()
    const quiet = await ADAPTERS[name]!(false)
    try {
      expect(await quiet.send(forged.headers, forged.body)).toBe(401)
    } finally {
      quiet.close()
    }
    expect(warn).not.toHaveBeenCalled()
  })
})
