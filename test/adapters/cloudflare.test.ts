/**
 * `svc-webhooks/cloudflare` inside real workerd (Miniflare): the case table over HTTP against the
 * wrapper with the Durable Object store (the tenant rows with each tenant's secrets read from an
 * `env` binding), then what only a Worker has: the secret binding (missing, rotated), the store's
 * atomicity and lease, and a bundle free of node:crypto.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { CASE_PATH, CASE_SECRET, describeCaseTable, httpTransport, TENANT_SECRETS } from '../support/case-table.js'
import { bundleWorker, startWorkerd, type WorkerdServer } from '../support/workerd.js'

let server: Promise<WorkerdServer> | undefined
let script = ''

function start(): Promise<WorkerdServer> {
  server ??= bundleWorker('test/adapters/cloudflare.worker.ts').then((bundled) => {
    script = bundled
    return startWorkerd({
      script,
      bindings: { SVC_WEBHOOK_SECRET: CASE_SECRET, OLD_SECRETS: 'svc_whsec_old-one, svc_whsec_old-two', TENANT_SECRETS: JSON.stringify(TENANT_SECRETS) },
      durableObjects: { WEBHOOK_IDEMPOTENCY: 'WebhookIdempotencyObject' }, // KV-backed here; the example below uses SQLite
    })
  })
  return server
}

afterAll(async () => {
  await (await server?.catch(() => undefined))?.dispose()
})

describeCaseTable('cloudflare wrapper + Durable Object store (workerd)', async () => httpTransport({ url: (await start()).url }))

async function call(path: string, init?: RequestInit): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch((await start()).url + path, init)
  return { status: res.status, json: (await res.json()) as Record<string, unknown> }
}

const store = async (op: string, key: string, owner: string, ms = 60_000) =>
  (await call('/store', { method: 'POST', body: JSON.stringify({ op, key, owner, ms }) })).json.result

function message(text: string) {
  const event = sampleEvent('message.received')
  event.message.text = text
  return event
}

describe('cloudflare: what only a Worker has', () => {
  it('bundles for workerd with WebCrypto, never node:crypto', async () => {
    await start()
    expect(script).toContain('crypto.subtle')
    expect(script).not.toMatch(/["']node:crypto["']/)
  })

  it('a missing secret binding answers 500 and logs the binding name, never a secret', async () => {
    const mf = await start()
    const signed = await signWebhook({ secret: CASE_SECRET, event: message('no secret') })
    const res = await call('/missing-secret', { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(500)
    expect(res.json).toEqual({ ok: false, code: 'internal_error' })
    // workerd flushes console output asynchronously: poll a bounded number of times.
    for (let i = 0; i < 50 && !mf.logs().includes('MISSING_SECRET_BINDING'); i++) await new Promise((r) => setTimeout(r, 50))
    expect(mf.logs()).toContain('cannot receive webhooks (secret binding "MISSING_SECRET_BINDING"): it is missing or empty')
    expect(mf.logs()).not.toContain(CASE_SECRET)
  })

  it('reads several secrets from several bindings and comma lists (rotation)', async () => {
    for (const secret of ['svc_whsec_old-one', 'svc_whsec_old-two', CASE_SECRET]) {
      const signed = await signWebhook({ secret, event: message('rotated') })
      expect((await call('/rotated', { method: 'POST', body: signed.body, headers: signed.headers })).status).toBe(200)
    }
    const wrong = await signWebhook({ secret: 'svc_whsec_never-configured', event: message('rotated') })
    const res = await call('/rotated', { method: 'POST', body: wrong.body, headers: wrong.headers })
    expect(res).toMatchObject({ status: 401, json: { code: 'invalid_signature' } })
  })

  it('releases the lease when a handler throws: the id is claimable at once', async () => {
    const signed = await signWebhook({ secret: CASE_SECRET, event: message('fail-once') })
    const res = await call(CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res).toMatchObject({ status: 500, json: { code: 'handler_failed' } })
    expect(await store('claim', `default:${signed.id}`, 'probe')).toBe('claimed')
    expect(await store('release', `default:${signed.id}`, 'probe')).toBe(true)
  })

  it('Durable Object store: claim, in flight, owner-only release, complete, retention', async () => {
    const key = `test:${crypto.randomUUID()}`
    expect(await store('claim', key, 'a')).toBe('claimed')
    expect(await store('claim', key, 'b')).toBe('in_flight')
    expect(await store('release', key, 'b')).toBe(false)
    expect(await store('complete', key, 'a')).toBe(true)
    expect(await store('claim', key, 'c')).toBe('completed')
    expect(await store('release', key, 'a')).toBe(false)
    expect(await store('claim', key, 'c')).toBe('completed')
  })

  it('Durable Object store: 20 concurrent claims of one id -> exactly one claimed', async () => {
    const key = `test:${crypto.randomUUID()}`
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store('claim', key, `owner-${i}`)))
    expect(results.filter((r) => r === 'claimed')).toHaveLength(1)
    expect(results.filter((r) => r === 'in_flight')).toHaveLength(19)
  })

  it('Durable Object store: an expired lease (a crashed request) frees the id', async () => {
    const key = `test:${crypto.randomUUID()}`
    expect(await store('claim', key, 'crashed', 1)).toBe('claimed')
    let result: unknown = 'in_flight'
    for (let i = 0; i < 100 && result !== 'claimed'; i++) {
      await new Promise((r) => setTimeout(r, 10))
      result = await store('claim', key, 'next')
    }
    expect(result).toBe('claimed')
    expect(await store('complete', key, 'crashed')).toBe(false)
  })

  it('builds the receiver once per env object, not per request', async () => {
    expect((await call('/stats')).json.optionsCalls).toBe(1)
  })
})

describe('cloudflare: examples/cloudflare runs in workerd as its README says', () => {
  let example: WorkerdServer | undefined
  afterAll(async () => {
    await example?.dispose()
  })

  it('answers a delivery, then its resend as a duplicate, and 404 elsewhere', async () => {
    example = await startWorkerd({
      script: await bundleWorker('examples/cloudflare/src/worker.ts'),
      bindings: { SVC_WEBHOOK_SECRET: 'svc_whsec_test' },
      durableObjects: { WEBHOOK_IDEMPOTENCY: { className: 'WebhookIdempotencyObject', useSQLite: true } },
    })
    const event = sampleEvent('message.received')
    const first = await signWebhook({ secret: 'svc_whsec_test', event })
    const again = await signWebhook({ secret: 'svc_whsec_test', event, id: first.id, timestamp: first.timestamp + 1 })
    const url = `${example.url}/webhooks/svc`
    const answers = []
    for (const signed of [first, again]) {
      const res = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers })
      answers.push({ status: res.status, json: await res.json() })
    }
    expect(answers).toEqual([
      { status: 200, json: { ok: true } },
      { status: 200, json: { ok: true, duplicate: true } },
    ])
    const other = await fetch(`${example.url}/`)
    expect(other.status).toBe(404)
    await other.text()
    for (let i = 0; i < 50 && !example.logs().includes(first.id); i++) await new Promise((r) => setTimeout(r, 50))
    expect(example.logs()).toContain(`(delivery ${first.id})`)
  })
})
