/**
 * The service emulator's sender over real HTTP on 127.0.0.1 (spec §6.1-6.3, §3.2): a real
 * receiver (svc-webhooks/node) verifies its deliveries; a scripted receiver records the exact
 * requests (sorted-key body, both signatures, the same id and a fresh timestamp on each attempt)
 * and answers what a test needs: 5xx retried then delivered, 4xx dropped, the endpoint disabled at
 * `disableAfter` and its deliveries held, resend of the stored bytes, rotation with no overlap.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createServiceClient, type ServiceClient } from 'svc-webhooks/service'
import { createNodeHandler } from 'svc-webhooks/node'
import { computeSignature, createServiceEmulator, serializeEvent, type ServiceEmulator } from 'svc-webhooks/testing'

interface Seen {
  headers: IncomingMessage['headers']
  body: string
}

/** A receiver that records every request and answers the next scripted status (then `fallback`). */
async function scripted(fallback = 200) {
  const seen: Seen[] = []
  const script: number[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
      res.writeHead(script.shift() ?? fallback).end()
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/svc`,
    seen,
    answer: (...statuses: number[]) => void script.push(...statuses),
    close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done()))),
  }
}

/** Checks both signatures of a recorded request with `secret`, computed here from the spec's formulas (§6.2). */
async function signedWith(secret: string, { headers, body }: Seen): Promise<{ v2: boolean; v1: boolean }> {
  const id = headers['svc-webhook-id'] as string
  const timestamp = headers['svc-webhook-timestamp'] as string
  const bytes = new TextEncoder().encode(body)
  return {
    v2: headers['svc-webhook-signature-v2'] === `v2=${await computeSignature(secret, `${id}.${timestamp}.`, bytes)}`,
    v1: headers['svc-webhook-signature'] === `v1=${await computeSignature(secret, `${timestamp}.`, bytes)}`,
  }
}

let emulator: ServiceEmulator
let service: ServiceClient
const fast = { firstDelayMs: 5, maxDelayMs: 20, maxAttempts: 8 }
const closers: Array<() => Promise<void>> = []

async function receiver(fallback = 200) {
  const r = await scripted(fallback)
  closers.push(r.close)
  return r
}

beforeAll(async () => {
  emulator = await createServiceEmulator({ retry: fast, disableAfter: 5 })
  service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
})
afterEach(async () => {
  await emulator.settled()
  for (const close of closers.splice(0)) await close()
})
afterAll(() => emulator.close())

const create = (url: string, subscribed_events: string[] = []) => service.endpoints.create({ label: 'test', url, subscribed_events })

describe('a real receiver verifies what the emulator sends', () => {
  it('svc-webhooks/node behind node:http: processed once, by its delivery id', async () => {
    const processed: string[] = []
    let secret = ''
    const handle = createNodeHandler({ secret: () => secret, endpoint: () => 'shop', log: false, on: { 'message.received': (_e, d) => void processed.push(d.id) } })
    const server = createServer(handle)
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    closers.push(() => new Promise((done) => server.close(() => done())))
    const endpoint = await create(`http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/svc`)
    secret = endpoint.signing_secret
    const ids = [emulator.send(endpoint.id), emulator.send(endpoint.id)]
    await emulator.settled()
    expect(processed.sort()).toEqual([...ids].sort())
    expect(emulator.deliveries().filter((d) => ids.includes(d.id)).map((d) => d.state)).toEqual(['delivered', 'delivered'])
    const view = emulator.endpoint(endpoint.id)!
    expect(view.consecutive_failures).toBe(0)
    expect(view.last_delivery_at).not.toBeNull()
  })

  it('the body has sorted keys and no whitespace, the §6.1 fields, and both signatures with the current secret', async () => {
    const r = await receiver()
    const endpoint = await create(r.url)
    const id = emulator.send(endpoint.id)
    await emulator.settled()
    const [request] = r.seen
    expect(request!.body).toBe(serializeEvent(JSON.parse(request!.body)))
    expect(request!.body).toBe(emulator.deliveries().find((d) => d.id === id)!.body)
    const event = JSON.parse(request!.body) as { business_id: string; message: Record<string, string> }
    expect(event).toMatchObject({ event: 'message.received', business_id: emulator.businessId })
    expect(Object.keys(event.message).sort()).toEqual(['chat_id', 'created_at', 'from', 'id', 'sender_type', 'text'])
    expect(event.message.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/)
    expect(request!.headers).toMatchObject({ 'svc-webhook-id': id, 'svc-webhook-event': 'message.received', 'content-type': 'application/json' })
    expect(Math.abs(Number(request!.headers['svc-webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60)
    expect(await signedWith(endpoint.signing_secret, request!)).toEqual({ v2: true, v1: true })
  })

  it('only to endpoints subscribed to the event (an empty list takes every event)', async () => {
    const r = await receiver()
    const endpoint = await create(r.url, ['message.received'])
    expect(() => emulator.send(endpoint.id, { event: 'template.approved', id: 'x' })).toThrow(/not subscribed/)
    const all = await create(r.url, [])
    emulator.send(all.id, { event: 'template.approved', id: 'x' })
    await emulator.settled()
    expect(r.seen.map((s) => s.headers['svc-webhook-event'])).toEqual(['template.approved'])
  })
})

describe('§6.3: what each answer does', () => {
  it('5xx and 429 are retried with the same id, a fresh timestamp and fresh signatures, then delivered', async () => {
    const r = await receiver()
    r.answer(503, 500, 429)
    const endpoint = await create(r.url)
    const id = emulator.send(endpoint.id)
    await emulator.settled()
    const delivery = emulator.deliveries().find((d) => d.id === id)!
    expect(delivery.attempts.map((a) => a.status)).toEqual([503, 500, 429, 200])
    expect(delivery.state).toBe('delivered')
    expect(new Set(r.seen.map((s) => s.headers['svc-webhook-id']))).toEqual(new Set([id]))
    expect(new Set(r.seen.map((s) => s.body)).size).toBe(1)
    for (const request of r.seen) expect(await signedWith(endpoint.signing_secret, request)).toEqual({ v2: true, v1: true })
    expect(emulator.endpoint(endpoint.id)!.consecutive_failures).toBe(0)
  })

  it('another 4xx is dropped: one attempt, one failure counted', async () => {
    const r = await receiver()
    r.answer(400)
    const endpoint = await create(r.url)
    const id = emulator.send(endpoint.id)
    await emulator.settled()
    const delivery = emulator.deliveries().find((d) => d.id === id)!
    expect([delivery.state, delivery.attempts.length]).toEqual(['dropped', 1])
    expect(emulator.endpoint(endpoint.id)!.consecutive_failures).toBe(1)
  })

  it('no answer within timeoutMs is a failure, retried', async () => {
    const slow = await createServiceEmulator({ timeoutMs: 50, retry: { firstDelayMs: 1, maxAttempts: 2 } })
    const hang = createServer(() => undefined)
    await new Promise<void>((done) => hang.listen(0, '127.0.0.1', done))
    try {
      const client = createServiceClient({ baseUrl: slow.baseUrl, token: slow.token, businessId: slow.businessId })
      const endpoint = await client.endpoints.create({ label: 'slow', url: `http://127.0.0.1:${(hang.address() as AddressInfo).port}/`, subscribed_events: [] })
      const id = slow.send(endpoint.id)
      await slow.settled()
      const delivery = slow.deliveries().find((d) => d.id === id)!
      expect(delivery.attempts.map((a) => a.error)).toEqual(['timeout', 'timeout'])
      expect(delivery.state).toBe('failed')
      expect(slow.endpoint(endpoint.id)!.consecutive_failures).toBe(2)
    } finally {
      await slow.close()
      hang.closeAllConnections()
      hang.close()
    }
  })
})

describe('§3.2: disabled after consecutive failures', () => {
  it('at disableAfter: enabled false, last_error set, pending and later deliveries held', async () => {
    const r = await receiver(503)
    const endpoint = await create(r.url)
    const first = emulator.send(endpoint.id)
    await emulator.settled()
    const view = emulator.endpoint(endpoint.id)!
    expect(view).toMatchObject({ enabled: false, consecutive_failures: 5, last_error: 'HTTP 503' })
    expect(emulator.deliveries().find((d) => d.id === first)!.state).toBe('held')
    expect(r.seen).toHaveLength(5)

    const later = emulator.send(endpoint.id)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === later)).toMatchObject({ state: 'held', attempts: [] })
    expect(r.seen).toHaveLength(5)

    // Enabling resets the streak and sends nothing by itself; a held delivery is resent by id.
    const enabled = await service.endpoints.enable(endpoint.id)
    expect([enabled.enabled, enabled.consecutive_failures]).toEqual([true, 0])
    await emulator.settled()
    expect(r.seen).toHaveLength(5)
    r.answer(200)
    await service.deliveries.resend(later)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === later)!.state).toBe('delivered')
  })

  it('with the defaults: 20 consecutive failures across deliveries, connection refused counted', async () => {
    const defaults = await createServiceEmulator({ retry: { firstDelayMs: 1, maxDelayMs: 2 } })
    try {
      const client = createServiceClient({ baseUrl: defaults.baseUrl, token: defaults.token, businessId: defaults.businessId })
      const probe = createServer()
      await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done))
      const port = (probe.address() as AddressInfo).port
      await new Promise((done) => probe.close(done))
      const endpoint = await client.endpoints.create({ label: 'down', url: `http://127.0.0.1:${port}/`, subscribed_events: [] })
      const ids = [defaults.send(endpoint.id), defaults.send(endpoint.id), defaults.send(endpoint.id)]
      await defaults.settled()
      const view = (await client.endpoints.list()).find((e) => e.id === endpoint.id)!
      expect(view).toMatchObject({ enabled: false, consecutive_failures: 20, last_error: 'ECONNREFUSED' })
      const attempts = defaults.deliveries().reduce((n, d) => n + d.attempts.length, 0)
      // Attempts already in flight when the 20th failure disabled it are recorded, not counted.
      expect(attempts).toBeGreaterThanOrEqual(20)
      expect(attempts).toBeLessThanOrEqual(22)
      expect(defaults.deliveries().filter((d) => ids.includes(d.id)).map((d) => d.state)).toEqual(['held', 'held', 'held'])
    } finally {
      await defaults.close()
    }
  })
})

describe('resend and rotation', () => {
  it('resend replays the stored bytes under the same id with a fresh timestamp', async () => {
    const r = await receiver()
    const endpoint = await create(r.url)
    const id = emulator.send(endpoint.id)
    await emulator.settled()
    await new Promise((done) => setTimeout(done, 1100)) // the next whole second, so the timestamp must differ
    const answer = await service.deliveries.resend(id)
    expect(answer).toMatchObject({ delivery_id: id })
    await emulator.settled()
    expect(r.seen).toHaveLength(2)
    const [original, again] = r.seen
    expect(again!.body).toBe(original!.body)
    expect(again!.headers['svc-webhook-id']).toBe(id)
    expect(Number(again!.headers['svc-webhook-timestamp'])).toBeGreaterThan(Number(original!.headers['svc-webhook-timestamp']))
    expect(again!.headers['svc-webhook-signature-v2']).not.toBe(original!.headers['svc-webhook-signature-v2'])
    expect(await signedWith(endpoint.signing_secret, again!)).toEqual({ v2: true, v1: true })
  })

  it('rotate: the next delivery is signed with the new secret only; a receiver holding the old one refuses it', async () => {
    let secrets: string[] = []
    const handle = createNodeHandler({ secret: () => secrets, endpoint: () => 'shop', log: false, on: { 'message.received': () => undefined } })
    const server = createServer(handle)
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    closers.push(() => new Promise((done) => server.close(() => done())))
    const endpoint = await create(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
    secrets = [endpoint.signing_secret]
    const rotated = await service.endpoints.rotateSecret(endpoint.id)
    expect(emulator.secretOf(endpoint.id)).toBe(rotated.signing_secret)

    const refused = emulator.send(endpoint.id)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === refused)).toMatchObject({ state: 'dropped', attempts: [{ status: 401 }] })

    // Once the receiver holds the new secret, resending the refused delivery by id delivers it.
    secrets = [rotated.signing_secret]
    await service.deliveries.resend(refused)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === refused)!.state).toBe('delivered')
  })

  it('delete stops delivery; the API then answers 404 for it', async () => {
    const r = await receiver(503)
    const endpoint = await create(r.url)
    const id = emulator.send(endpoint.id)
    await service.endpoints.remove(endpoint.id)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === id)!.state).toBe('failed')
    expect(emulator.endpoint(endpoint.id)).toBeUndefined()
    await expect(service.deliveries.resend(id)).rejects.toMatchObject({ status: 404 })
  })
})

describe('the API checks', () => {
  it('401 without the token, 422 without business-id, 404 for another business', async () => {
    const url = `${emulator.baseUrl}/api/v1/webhook-endpoints`
    const noToken = await fetch(url, { headers: { 'business-id': emulator.businessId } })
    expect([noToken.status, await noToken.json()]).toEqual([401, { detail: 'Not authenticated' }])
    const noBusiness = await fetch(url, { headers: { authorization: `Bearer ${emulator.token}` } })
    expect(noBusiness.status).toBe(422)
    expect(((await noBusiness.json()) as { detail: Array<{ loc: string[] }> }).detail[0]!.loc).toEqual(['header', 'business-id'])
    const other = await fetch(url, { headers: { authorization: `Bearer ${emulator.token}`, 'business-id': crypto.randomUUID() } })
    expect(other.status).toBe(404)
    expect(await other.json()).toMatchObject({ code: 'business_not_found' })
  })

  it('a malformed % escape in a path is answered (422 where an id goes, 404 elsewhere); the process never sees a throw', async () => {
    const headers = { authorization: `Bearer ${emulator.token}`, 'business-id': emulator.businessId }
    const uncaught: unknown[] = []
    const record = (error: unknown) => void uncaught.push(error)
    process.on('uncaughtException', record)
    try {
      for (const path of ['/api/v1/webhook-endpoints/%E0%A4%A', '/api/v1/webhook-endpoints/%zz/rotate-secret', '/api/v1/webhook-endpoints/deliveries/%/resend']) {
        const answer = await fetch(`${emulator.baseUrl}${path}`, { method: path.endsWith('t') || path.endsWith('d') ? 'POST' : 'PATCH', headers, body: '{}' })
        expect(answer.status, path).toBe(422)
        expect(((await answer.json()) as { detail: Array<{ type: string }> }).detail[0]!.type).toBe('uuid_parsing')
      }
      const elsewhere = await fetch(`${emulator.baseUrl}/api/v1/%E0%A4%A/x`, { headers })
      expect(elsewhere.status).toBe(404)
      await new Promise((done) => setTimeout(done, 20))
      expect(uncaught).toEqual([])
      // Still serving.
      expect((await fetch(`${emulator.baseUrl}/api/v1/webhook-endpoints`, { headers })).status).toBe(200)
    } finally {
      process.off('uncaughtException', record)
    }
  })

  it('injected failures carry the service\'s codes: 401 {detail}, 403 forbidden, 422 a list, 429 rate_limited, 500, 502, 503, 504', async () => {
    const headers = { authorization: `Bearer ${emulator.token}`, 'business-id': emulator.businessId }
    const seen: unknown[] = []
    for (const status of [401, 403, 422, 429, 500, 502, 503, 504]) {
      emulator.failNextApiCalls(1, status)
      const answer = await fetch(`${emulator.baseUrl}/api/v1/webhook-endpoints`, { headers })
      const body = (await answer.json()) as { code?: string; detail: unknown }
      seen.push([answer.status, body.code ?? (Array.isArray(body.detail) ? 'list' : 'detail')])
    }
    expect(seen).toEqual([[401, 'detail'], [403, 'forbidden'], [422, 'list'], [429, 'rate_limited'], [500, 'internal_error'], [502, 'bad_gateway'], [503, 'service_unavailable'], [504, 'gateway_timeout']])
  })

  it('act, then lose the answer; act, then answer late', async () => {
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId, retries: 0 })
    const { id, signing_secret: first } = await service.endpoints.create({ label: 'faults', url: 'https://example.com/faults', subscribed_events: [] })
    emulator.faultApiCalls(1, { path: /rotate-secret$/, lose: true })
    await expect(service.endpoints.rotateSecret(id)).rejects.toMatchObject({ code: 'outcome_unknown' })
    // It did rotate: the secret changed, and nobody got it.
    expect(emulator.secretOf(id)).not.toBe(first)
    const lost = emulator.secretOf(id)
    emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 300 })
    const started = Date.now()
    const late = service.endpoints.rotateSecret(id)
    await new Promise((done) => setTimeout(done, 50))
    // Acted at once, answered late.
    expect(emulator.secretOf(id)).not.toBe(lost)
    expect((await late).signing_secret).toBe(emulator.secretOf(id))
    expect(Date.now() - started).toBeGreaterThanOrEqual(280)
  })

  it('enabling an endpoint that is already enabled keeps its failure streak; enabling a disabled one resets it', async () => {
    const failing = await scripted(500)
    const local = await createServiceEmulator({ retry: { firstDelayMs: 5, maxDelayMs: 5, maxAttempts: 1 }, disableAfter: 3 })
    const service = createServiceClient({ baseUrl: local.baseUrl, token: local.token, businessId: local.businessId })
    try {
      const { id } = await service.endpoints.create({ label: 'streak', url: failing.url, subscribed_events: [] })
      local.send(id)
      local.send(id)
      await local.settled()
      expect(local.endpoint(id)).toMatchObject({ enabled: true, consecutive_failures: 2 })
      await service.endpoints.enable(id)
      expect(local.endpoint(id)).toMatchObject({ enabled: true, consecutive_failures: 2 })
      local.send(id)
      await local.settled()
      expect(local.endpoint(id)).toMatchObject({ enabled: false, consecutive_failures: 3 })
      await service.endpoints.enable(id)
      expect(local.endpoint(id)).toMatchObject({ enabled: true, consecutive_failures: 0 })
    } finally {
      await local.close()
      await failing.close()
    }
  })

  it('close() stops the server: a call afterwards is refused', async () => {
    const short = await createServiceEmulator()
    await short.close()
    await expect(fetch(`${short.baseUrl}/api/v1/webhook-endpoints`)).rejects.toThrow()
  })
})
