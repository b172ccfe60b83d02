/**
 * The DESIGN.md answers table through the built `createWebhookReceiver().handle()`: every row,
 * the concurrency and retry promises behind it (spec/service-api.md §6.3: 5xx and 429 are
 * retried, every other 4xx is permanent), endpoint namespacing and the onResult hook.
 */
import { describe, expect, it } from 'vitest'
import {
  createWebhookReceiver,
  MemoryStore,
  type IdempotencyStore,
  type MessageReceivedEvent,
  type VerifiedDelivery,
  type WebhookReceiverOptions,
  type WebhookResponse,
  type WebhookResult,
} from 'svc-webhooks'
import { sampleEvent, signWebhook, type SignWebhookOptions } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_ReceiverTestSecretQ2hhbmdlTWU'
const NOW = 1_763_806_530
const now = () => NOW * 1000

function message(text = 'hello') {
  const event = sampleEvent('message.received')
  event.message.text = text
  return event
}

/** A signed delivery as the service sends it: same id across retries, fresh timestamp each time. */
async function delivery(options: Partial<SignWebhookOptions> = {}) {
  const signed = await signWebhook({ secret: SECRET, event: message(), timestamp: NOW, ...options })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers }
}

function json(answer: WebhookResponse): Record<string, unknown> {
  expect(answer.headers['content-type']).toBe('application/json')
  return JSON.parse(answer.body) as Record<string, unknown>
}

/** A receiver whose handler records its runs; `behaviour` decides what each run does. */
function receiver(options: Partial<WebhookReceiverOptions> = {}, behaviour: (event: MessageReceivedEvent, d: VerifiedDelivery<MessageReceivedEvent>) => unknown = () => {}) {
  const runs: string[] = []
  const results: WebhookResult[] = []
  const r = createWebhookReceiver({
    secret: SECRET,
    now,
    onResult: (result) => results.push(result),
    on: {
      'message.received': async (event, d) => {
        runs.push(d.id)
        await behaviour(event, d)
      },
    },
    ...options,
  })
  return { handle: r.handle, runs, results }
}

describe('verified deliveries', () => {
  it('processed: 200 and the handler runs once with (event, delivery)', async () => {
    let seen: { text: string; id: string; version: string; raw: Uint8Array } | undefined
    const r = receiver({}, (event, d) => {
      seen = { text: event.message.text, id: d.id, version: d.signatureVersion, raw: d.rawBody }
    })
    const request = await delivery({ id: 'evt-processed' })
    const answer = await r.handle(request)
    expect(answer.status).toBe(200)
    expect(json(answer)).toEqual({ ok: true })
    expect(r.runs).toEqual(['evt-processed'])
    expect(seen).toEqual({ text: 'hello', id: 'evt-processed', version: 'v2', raw: request.body })
    expect(r.results[0]).toMatchObject({ outcome: 'processed', status: 200, id: 'evt-processed', eventType: 'message.received', signatureVersion: 'v2' })
  })

  it('duplicate: the same id with a fresh timestamp and signature is 200 duplicate, handler not run again', async () => {
    const r = receiver()
    expect((await r.handle(await delivery({ id: 'evt-dup' }))).status).toBe(200)
    const retry = await r.handle(await delivery({ id: 'evt-dup', timestamp: NOW + 60 }))
    expect(retry.status).toBe(200)
    expect(json(retry)).toEqual({ ok: true, duplicate: true })
    expect(r.runs).toEqual(['evt-dup'])
    expect(r.results[1]).toMatchObject({ outcome: 'duplicate', code: 'duplicate' })
  })

  it('20 concurrent copies of one id while the handler runs: one run, the others 429 with Retry-After', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const r = receiver({}, () => gate)
    const requests = await Promise.all(Array.from({ length: 20 }, (_, i) => delivery({ id: 'evt-concurrent', timestamp: NOW - i })))
    const pending = requests.map((request) => r.handle(request))
    // Let every request reach the store before the one running handler finishes.
    const refused = await Promise.all(pending.slice(1))
    release()
    const first = await pending[0]!
    expect(first.status).toBe(200)
    expect(r.runs).toEqual(['evt-concurrent'])
    for (const answer of refused) {
      expect(answer.status).toBe(429)
      expect(answer.headers['retry-after']).toBe('5')
      expect(json(answer)).toEqual({ ok: false, code: 'in_flight' })
    }
    // The sender's retry after Retry-After finds it done.
    const retry = await r.handle(await delivery({ id: 'evt-concurrent' }))
    expect(json(retry)).toEqual({ ok: true, duplicate: true })
    expect(r.runs).toHaveLength(1)
  })

  it('20 concurrent copies with a fast handler: exactly one run, every other answer 429 in_flight or 200 duplicate', async () => {
    const r = receiver({}, () => new Promise((resolve) => setImmediate(resolve)))
    const requests = await Promise.all(Array.from({ length: 20 }, () => delivery({ id: 'evt-race' })))
    const answers = await Promise.all(requests.map((request) => r.handle(request)))
    expect(r.runs).toEqual(['evt-race'])
    const bodies = answers.map((a) => `${a.status} ${a.body}`)
    expect(bodies.filter((b) => b === '200 {"ok":true}')).toHaveLength(1)
    for (const b of bodies) expect(['200 {"ok":true}', '200 {"ok":true,"duplicate":true}', '429 {"ok":false,"code":"in_flight"}']).toContain(b)
    for (const a of answers.filter((a) => a.status === 429)) expect(a.headers['retry-after']).toBe('5')
  })

  it('handler throws once: 500 handler_failed, the claim is released and the retry runs it', async () => {
    let attempts = 0
    const r = receiver({}, () => {
      if (++attempts === 1) throw new Error('database down')
    })
    const failed = await r.handle(await delivery({ id: 'evt-fail-once' }))
    expect(failed.status).toBe(500)
    expect(json(failed)).toEqual({ ok: false, code: 'handler_failed' })
    expect(r.results[0]).toMatchObject({ outcome: 'handler_failed', code: 'handler_failed' })
    expect((r.results[0]!.error as Error).message).toBe('database down')
    const retry = await r.handle(await delivery({ id: 'evt-fail-once', timestamp: NOW + 30 }))
    expect(retry.status).toBe(200)
    expect(json(retry)).toEqual({ ok: true })
    expect(r.runs).toEqual(['evt-fail-once', 'evt-fail-once'])
  })

  it('v1-only with allowV1: a genuine retry (fresh timestamp) runs, an exact replay is 200 duplicate; the unsigned id is never a key', async () => {
    const claims: string[] = []
    const memory = new MemoryStore({ now })
    const store: IdempotencyStore = {
      claim: (key, owner, lease) => (claims.push(key), memory.claim(key, owner, lease)),
      complete: (key, owner, retention) => memory.complete(key, owner, retention),
      release: (key, owner) => memory.release(key, owner),
    }
    const r = receiver({ allowV1: true, store })
    for (let i = 0; i < 3; i++) {
      const answer = await r.handle(await delivery({ id: 'evt-v1', schemes: ['v1'], timestamp: NOW - i }))
      expect(json(answer)).toEqual({ ok: true })
    }
    expect(r.runs).toEqual(['evt-v1', 'evt-v1', 'evt-v1'])
    const replay = await delivery({ id: 'evt-v1', schemes: ['v1'], timestamp: NOW - 1 })
    for (let i = 0; i < 3; i++) expect(json(await r.handle(replay))).toEqual({ ok: true, duplicate: true })
    // The same signed bytes under another (unsigned) id are the same delivery.
    expect(json(await r.handle({ ...replay, headers: { ...replay.headers, 'svc-webhook-id': 'evt-other' } }))).toEqual({ ok: true, duplicate: true })
    expect(r.runs).toHaveLength(3)
    expect(claims.every((key) => !key.includes('evt-v1') && key.startsWith('default:v1 '))).toBe(true)
    expect(r.results.map((x) => x.signatureVersion)).toEqual(['v1', 'v1', 'v1', 'v1', 'v1', 'v1', 'v1'])
  })

  it('with allowV1, a captured v2 delivery replayed with its v2 header blanked or removed is 200 duplicate (runs once in all)', async () => {
    const r = receiver({ allowV1: true })
    const captured = await delivery({ id: 'evt-captured' })
    expect(json(await r.handle(captured))).toEqual({ ok: true })
    const { 'svc-webhook-signature-v2': _v2, ...withoutV2 } = captured.headers
    const blanked = { ...captured, headers: { ...captured.headers, 'svc-webhook-signature-v2': '' } }
    const removed = { ...captured, headers: withoutV2 }
    for (const replay of [blanked, removed, removed, blanked, captured]) {
      expect(json(await r.handle(replay))).toEqual({ ok: true, duplicate: true })
    }
    expect(r.runs).toEqual(['evt-captured'])
    // The sender's own v2 retry (same id, fresh timestamp) is still a duplicate; a new delivery still runs.
    expect(json(await r.handle(await delivery({ id: 'evt-captured', timestamp: NOW + 5 })))).toEqual({ ok: true, duplicate: true })
    expect(json(await r.handle(await delivery({ id: 'evt-next', event: message('next') })))).toEqual({ ok: true })
    expect(r.runs).toEqual(['evt-captured', 'evt-next'])
  })

  it('unknown event type: 200 ignored, no handler and no claim', async () => {
    const claims: string[] = []
    const store: IdempotencyStore = {
      claim: async (key) => (claims.push(key), 'claimed' as const),
      complete: async () => true,
      release: async () => true,
    }
    const r = receiver({ store })
    const answer = await r.handle(await delivery({ event: { event: 'template.approved', id: 'tpl_1' } }))
    expect(answer.status).toBe(200)
    expect(json(answer)).toEqual({ ok: true, ignored: true })
    expect(r.runs).toEqual([])
    expect(claims).toEqual([])
    expect(r.results[0]).toMatchObject({ outcome: 'ignored', eventType: 'template.approved' })
  })

  it('the event type comes from the signed body, not the svc-webhook-event header', async () => {
    const r = receiver()
    const request = await delivery({ id: 'evt-header-lies' })
    const answer = await r.handle({ ...request, headers: { ...request.headers, 'svc-webhook-event': 'template.approved' } })
    expect(json(answer)).toEqual({ ok: true })
    expect(r.runs).toEqual(['evt-header-lies'])
  })
})

describe('the idempotency store', () => {
  const failing = (method: 'claim' | 'complete' | 'release'): { store: IdempotencyStore; calls: string[] } => {
    const memory = new MemoryStore({ now })
    const calls: string[] = []
    const store: IdempotencyStore = {
      claim: (k, o, l) => (calls.push('claim'), method === 'claim' ? Promise.reject(new Error('ECONNREFUSED')) : memory.claim(k, o, l)),
      complete: (k, o, r) => (calls.push('complete'), method === 'complete' ? Promise.reject(new Error('ECONNRESET')) : memory.complete(k, o, r)),
      release: (k, o) => (calls.push('release'), method === 'release' ? Promise.reject(new Error('ECONNRESET')) : memory.release(k, o)),
    }
    return { store, calls }
  }

  it('a store that rejects the claim: 503 store_unavailable with Retry-After, handler not run', async () => {
    const { store } = failing('claim')
    const r = receiver({ store, retryAfterSeconds: 2.5 })
    const answer = await r.handle(await delivery())
    expect(answer.status).toBe(503)
    expect(answer.headers['retry-after']).toBe('3')
    expect(json(answer)).toEqual({ ok: false, code: 'store_unavailable' })
    expect(r.runs).toEqual([])
    expect(r.results[0]).toMatchObject({ outcome: 'store_unavailable', status: 503 })
  })

  it('a store that rejects the completion: still 200 (the work is done), the error reported to onResult', async () => {
    const { store, calls } = failing('complete')
    const r = receiver({ store })
    const answer = await r.handle(await delivery())
    expect(answer.status).toBe(200)
    expect(calls).toEqual(['claim', 'complete'])
    expect((r.results[0]!.error as Error).message).toBe('ECONNRESET')
  })

  it('a store that rejects the release after a handler failure: still 500, so the sender retries', async () => {
    const { store, calls } = failing('release')
    const r = receiver({ store }, () => {
      throw new Error('boom')
    })
    const answer = await r.handle(await delivery())
    expect(answer.status).toBe(500)
    expect(calls).toEqual(['claim', 'release'])
  })

  it('dedupe keys are namespaced by endpoint: one store, two endpoints, the same id runs once in each', async () => {
    const store = new MemoryStore({ now })
    const a = receiver({ store, endpoint: 'orders' })
    const b = receiver({ store, endpoint: 'support' })
    const request = await delivery({ id: 'evt-shared-id' })
    expect(json(await a.handle(request))).toEqual({ ok: true })
    expect(json(await b.handle(request))).toEqual({ ok: true })
    expect(json(await a.handle(request))).toEqual({ ok: true, duplicate: true })
    expect(a.runs).toEqual(['evt-shared-id'])
    expect(b.runs).toEqual(['evt-shared-id'])
    // Same endpoint (the default) on the same store: a duplicate.
    const c = receiver({ store })
    const d = receiver({ store })
    expect(json(await c.handle(request))).toEqual({ ok: true })
    expect(json(await d.handle(request))).toEqual({ ok: true, duplicate: true })
  })

  it('dedupe keys are unambiguous: endpoint "shop" + id "eu:X" and endpoint "shop:eu" + id "X" both run; plain names keep their keys', async () => {
    const keys: string[] = []
    const memory = new MemoryStore({ now })
    const store: IdempotencyStore = {
      claim: (key, owner, lease) => (keys.push(key), memory.claim(key, owner, lease)),
      complete: (key, owner, retention) => memory.complete(key, owner, retention),
      release: (key, owner) => memory.release(key, owner),
    }
    const shop = receiver({ store, endpoint: 'shop' })
    const shopEu = receiver({ store, endpoint: 'shop:eu' })
    const percent = receiver({ store, endpoint: 'shop%3Aeu' })
    expect(json(await shop.handle(await delivery({ id: 'eu:X' })))).toEqual({ ok: true })
    expect(json(await shopEu.handle(await delivery({ id: 'X' })))).toEqual({ ok: true })
    expect(json(await percent.handle(await delivery({ id: 'X' })))).toEqual({ ok: true })
    expect([shop.runs, shopEu.runs, percent.runs]).toEqual([['eu:X'], ['X'], ['X']])
    // A name without ':' or '%' keeps the key 0.1.0 wrote, so an upgrade re-runs nothing.
    expect(keys).toEqual(['shop:eu:X', 'shop%3Aeu:X', 'shop%253Aeu:X'])
  })

  it('a store whose complete() or release() throws synchronously or returns a plain value: the answer is unchanged', async () => {
    const memory = new MemoryStore({ now })
    const syncThrow: IdempotencyStore = {
      claim: (key, owner, lease) => memory.claim(key, owner, lease),
      complete: () => {
        throw new Error('sync complete')
      },
      release: () => {
        throw new Error('sync release')
      },
    }
    const plain = {
      claim: (key: string, owner: string, lease: number) => memory.claim(key, owner, lease),
      complete: () => true,
      release: () => true,
    } as unknown as IdempotencyStore
    for (const store of [syncThrow, plain]) {
      const ok = receiver({ store })
      expect(json(await ok.handle(await delivery()))).toEqual({ ok: true })
      expect(ok.runs).toHaveLength(1)
      const failingHandler = receiver({ store }, () => {
        throw new Error('boom')
      })
      expect((await failingHandler.handle(await delivery())).status).toBe(500)
    }
  })

  it('a handler that outlives its lease: a retry after the lease runs it again, and both completions are recorded', async () => {
    let clock = NOW * 1000
    const store = new MemoryStore({ now: () => clock })
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let calls = 0
    const r = receiver({ store, leaseMs: 1000, now: () => clock }, () => (++calls === 1 ? gate : undefined))
    const slow = r.handle(await delivery({ id: 'evt-slow' }))
    expect((await r.handle(await delivery({ id: 'evt-slow' }))).status).toBe(429)
    clock += 1001
    expect(json(await r.handle(await delivery({ id: 'evt-slow', timestamp: NOW + 1 })))).toEqual({ ok: true })
    release()
    expect((await slow).status).toBe(200)
    expect(r.runs).toEqual(['evt-slow', 'evt-slow'])
    expect(json(await r.handle(await delivery({ id: 'evt-slow', timestamp: NOW + 2 })))).toEqual({ ok: true, duplicate: true })
  })
})

describe('refusals', () => {
  const cases: { name: string; status: number; code: string; make: () => Promise<{ method?: string; body: unknown; headers: Record<string, string> }> }[] = [
    { name: 'bad signature', status: 401, code: 'invalid_signature', make: () => delivery({ secret: 'svc_whsec_SomeoneElsesSecret' }) },
    { name: 'tampered body', status: 401, code: 'invalid_signature', make: async () => {
      const d = await delivery()
      const body = d.body.slice()
      body[body.length - 3]! ^= 1
      return { ...d, body }
    } },
    { name: 'stale timestamp', status: 401, code: 'timestamp_too_old', make: () => delivery({ timestamp: NOW - 301 }) },
    { name: 'future timestamp', status: 401, code: 'timestamp_in_future', make: () => delivery({ timestamp: NOW + 301 }) },
    { name: 'no signature header', status: 401, code: 'missing_signature', make: () => delivery({ schemes: [] }) },
    { name: 'v1 only without allowV1', status: 401, code: 'v1_not_allowed', make: () => delivery({ schemes: ['v1'] }) },
    { name: 'missing id', status: 400, code: 'missing_id', make: async () => {
      const d = await delivery()
      const { 'svc-webhook-id': _, ...headers } = d.headers
      return { ...d, headers }
    } },
    { name: 'id with a space', status: 400, code: 'invalid_id', make: () => delivery({ id: 'two words' }) },
    { name: 'missing timestamp', status: 400, code: 'missing_timestamp', make: async () => {
      const d = await delivery()
      const { 'svc-webhook-timestamp': _, ...headers } = d.headers
      return { ...d, headers }
    } },
    { name: 'timestamp not decimal seconds', status: 400, code: 'invalid_timestamp', make: async () => {
      const d = await delivery()
      return { ...d, headers: { ...d.headers, 'svc-webhook-timestamp': '1763806530.5' } }
    } },
    { name: 'signed body that is not JSON', status: 400, code: 'invalid_json', make: () => delivery({ body: 'not json' }) },
    { name: 'signed JSON without a string event', status: 400, code: 'invalid_json', make: () => delivery({ body: '{"event":42}' }) },
    { name: 'signed JSON array', status: 400, code: 'invalid_json', make: () => delivery({ body: '[{"event":"message.received"}]' }) },
    { name: 'body over maxBodyBytes', status: 413, code: 'body_too_large', make: () => delivery({ body: `{"event":"message.received","pad":"${'x'.repeat(2048)}"}` }) },
    { name: 'GET', status: 405, code: 'method_not_allowed', make: async () => ({ ...(await delivery()), method: 'GET' }) },
    { name: 'parsed body (mounting order)', status: 500, code: 'body_already_parsed', make: async () => ({ ...(await delivery()), body: message() }) },
  ]

  it.each(cases)('$name → $status $code, handler not run, nothing leaked', async ({ status, code, make }) => {
    const r = receiver({ maxBodyBytes: 1024 })
    const request = await make()
    const answer = await r.handle(request as Parameters<typeof r.handle>[0])
    expect(answer.status).toBe(status)
    expect(json(answer)).toEqual({ ok: false, code })
    expect(r.runs).toEqual([])
    if (status === 405) expect(answer.headers.allow).toBe('POST')
    expect(r.results[0]).toMatchObject({ status, code })
    expect(answer.body).not.toContain(SECRET)
    expect(answer.body).not.toContain('hello')
  })

  it('accepts the method in any case and without one (adapters that only route POST)', async () => {
    const r = receiver()
    expect((await r.handle({ ...(await delivery({ id: 'm1' })), method: 'post' })).status).toBe(200)
    const { method: _, ...noMethod } = await delivery({ id: 'm2' })
    expect((await r.handle(noMethod)).status).toBe(200)
  })
})

describe('onResult', () => {
  it('is called once per request with no body and no secret, and a throwing hook changes nothing', async () => {
    const results: WebhookResult[] = []
    const r = createWebhookReceiver({
      secret: [SECRET, 'svc_whsec_OldSecretStillListed'],
      now,
      on: { 'message.received': () => {} },
      onResult: (result) => {
        results.push(result)
        throw new Error('logger exploded')
      },
    })
    const good = await delivery({ id: 'evt-logged' })
    const bad = await delivery({ secret: 'svc_whsec_Wrong' })
    expect((await r.handle(good)).status).toBe(200)
    expect((await r.handle(bad)).status).toBe(401)
    expect(results).toHaveLength(2)
    const signatures = [good.headers['svc-webhook-signature-v2']!, bad.headers['svc-webhook-signature-v2']!].map((h) => h.slice(3))
    for (const result of results) {
      const text = JSON.stringify(result, (_k, v: unknown) => (v instanceof Error ? { message: v.message, stack: v.stack } : v))
      for (const secret of [SECRET, 'svc_whsec_OldSecretStillListed', ...signatures, 'hello', 'business_id']) {
        expect(text).not.toContain(secret)
      }
      expect(Object.keys(result).sort()).not.toContain('rawBody')
      expect(result.durationMs).toBeGreaterThanOrEqual(0)
    }
    expect(results[1]).toMatchObject({ outcome: 'refused', status: 401, code: 'invalid_signature' })
  })

  it('an async hook that rejects changes nothing and is not an unhandled rejection (it would fail this run)', async () => {
    let calls = 0
    const r = createWebhookReceiver({
      secret: SECRET,
      now,
      on: { 'message.received': () => {} },
      onResult: async () => {
        calls++
        throw new Error('async logger exploded')
      },
    })
    expect((await r.handle(await delivery())).status).toBe(200)
    expect((await r.handle(await delivery({ secret: 'svc_whsec_Wrong' }))).status).toBe(401)
    // Let the rejections settle inside this test: vitest reports an unhandled one as an error.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(calls).toBe(2)
  })
})

describe('many endpoints, one receiver (secret and endpoint as functions of the request)', () => {
  const TENANTS: Record<string, string | string[]> = {
    acme: 'svc_whsec_AcmeTenantSecret',
    globex: ['svc_whsec_GlobexNewSecret', 'svc_whsec_GlobexOldSecret'],
  }
  const tenantOf = (request: { headers: Record<string, string | undefined> }) => request.headers['x-tenant'] ?? ''

  function multiTenant() {
    const runs: string[] = []
    const results: WebhookResult[] = []
    const r = createWebhookReceiver<{ headers: Record<string, string | undefined> }>({
      now,
      secret: async (request) => {
        const tenant = tenantOf(request)
        if (tenant === 'broken') throw new Error('secrets table unreachable')
        return TENANTS[tenant]
      },
      endpoint: (request) => tenantOf(request),
      onResult: (result) => results.push(result),
      on: { 'message.received': (_event, d) => void runs.push(d.id) },
    })
    return { r, runs, results }
  }

  async function to(tenant: string, secret: string, id = 'evt-tenant') {
    const d = await delivery({ secret, id })
    return { ...d, headers: { ...d.headers, 'x-tenant': tenant } }
  }

  it('each tenant is verified with its own secret (rotation lists too); the other tenant\'s signature is 401', async () => {
    const { r, runs } = multiTenant()
    expect(json(await r.handle(await to('acme', 'svc_whsec_AcmeTenantSecret', 'evt-a')))).toEqual({ ok: true })
    expect(json(await r.handle(await to('globex', 'svc_whsec_GlobexOldSecret', 'evt-g')))).toEqual({ ok: true })
    const crossed = await r.handle(await to('acme', 'svc_whsec_GlobexNewSecret', 'evt-x'))
    expect(crossed.status).toBe(401)
    expect(json(crossed)).toEqual({ ok: false, code: 'invalid_signature' })
    expect(runs).toEqual(['evt-a', 'evt-g'])
  })

  it('the same delivery id under two tenants runs once for each, and is a duplicate within one', async () => {
    const { r, runs } = multiTenant()
    expect(json(await r.handle(await to('acme', 'svc_whsec_AcmeTenantSecret', 'evt-same')))).toEqual({ ok: true })
    expect(json(await r.handle(await to('globex', 'svc_whsec_GlobexNewSecret', 'evt-same')))).toEqual({ ok: true })
    expect(json(await r.handle(await to('acme', 'svc_whsec_AcmeTenantSecret', 'evt-same')))).toEqual({ ok: true, duplicate: true })
    expect(runs).toEqual(['evt-same', 'evt-same'])
  })

  it('no secret for the request: 404 unknown_endpoint; a lookup that throws: 503 with Retry-After; both reported to onResult', async () => {
    const { r, runs, results } = multiTenant()
    const unknown = await r.handle(await to('initech', 'svc_whsec_AcmeTenantSecret'))
    expect(unknown.status).toBe(404)
    expect(json(unknown)).toEqual({ ok: false, code: 'unknown_endpoint' })
    const failed = await r.handle(await to('broken', 'svc_whsec_AcmeTenantSecret'))
    expect(failed.status).toBe(503)
    expect(failed.headers['retry-after']).toBe('5')
    expect(json(failed)).toEqual({ ok: false, code: 'secret_lookup_failed' })
    expect(runs).toEqual([])
    expect(results.map((x) => [x.outcome, x.code])).toEqual([
      ['refused', 'unknown_endpoint'],
      ['refused', 'secret_lookup_failed'],
    ])
    expect((results[1]!.error as Error).message).not.toContain('svc_whsec_')
  })

  it('onResult names the endpoint', async () => {
    const { r, results } = multiTenant()
    await r.handle(await to('globex', 'svc_whsec_GlobexNewSecret', 'evt-named'))
    expect(results[0]).toMatchObject({ outcome: 'processed', endpoint: 'globex', id: 'evt-named' })
  })

  it('a function secret without an endpoint function is a startup error that says why', () => {
    expect(() => createWebhookReceiver({ secret: () => 'svc_whsec_x', on: {} })).toThrow(/`endpoint` must be one too[\s\S]*mark each other's deliveries done/)
  })
})
