/**
 * A secret source inside verification, through the built package: the receiver's cache (one read
 * for many deliveries), the re-read on a mismatch (single-flight, and never trusting a read that
 * started before the delivery arrived), 503 `secret_pending` while a change is pending and its
 * bound, 503 for a source that cannot be read or holds garbage (never quoted in a log line),
 * per-tenant sources through a `secret` function, `verifyWebhook` and the verify-only path, and
 * svc-webhooks/node over real HTTP. The source here is an in-memory object: the receiver is under
 * test, not the source (test/stores/secret-sources.test.ts runs the real ones).
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createWebhookReceiver,
  verifyWebhook,
  type SecretSource,
  type SecretState,
  type WebhookReceiverOptions,
  type WebhookResponse,
} from 'svc-webhooks'
import { verifyRequest } from 'svc-webhooks/fetch'
import { createNodeHandler } from 'svc-webhooks/node'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { listen, type RunningServer } from '../support/servers.js'

const A = 'svc_whsec_SourceTestSecretAAAAAAAAAA'
const B = 'svc_whsec_SourceTestSecretBBBBBBBBBB'
const FORGED = 'svc_whsec_SourceTestSecretForgedXXXX'

/** A source in memory: its state can be changed as another process would, and its reads are counted. */
function memorySource(initial: SecretState | unknown) {
  let state = initial
  const source = {
    reads: 0,
    /** Held reads wait for this before answering (with the state as it was when the read started). */
    gate: undefined as Promise<void> | undefined,
    read(): Promise<SecretState> {
      source.reads++
      const snapshot = state
      return (source.gate ?? Promise.resolve()).then(() => snapshot as SecretState)
    },
    write(next: SecretState | unknown) {
      state = next
    },
  }
  return source
}

/** A promise and the function that settles it. */
function deferred() {
  let open!: () => void
  const promise = new Promise<void>((done) => (open = done))
  return { promise, open }
}

async function delivery(secret: string, id: `${string}-${string}-${string}-${string}-${string}` = randomUUID()) {
  const signed = await signWebhook({ secret, event: sampleEvent('message.received'), id })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers }
}

function receiverOf(source: SecretSource, options: Partial<WebhookReceiverOptions> = {}) {
  const lines: string[] = []
  const runs: string[] = []
  const receiver = createWebhookReceiver({
    secret: source,
    secretRereadMs: 20,
    // Short, so a pending mismatch is answered 503 at once here; the hold itself has its own tests.
    pendingHoldMs: 30,
    log: (line) => lines.push(line),
    on: { 'message.received': (_event, d) => void runs.push(d.id) },
    ...options,
  })
  const send = async (secret: string, id?: Id) => receiver.handle(await delivery(secret, id))
  return { receiver, lines, runs, send }
}

type Id = ReturnType<typeof randomUUID>
const PENDING_ID = randomUUID()
const FIRST_ID = randomUUID()
const ROTATION_ID = randomUUID()

const code = (answer: WebhookResponse) => (JSON.parse(answer.body) as { code?: string }).code
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

describe('a secret source in the receiver', () => {
  it('is read once for many deliveries: the first awaits the read, the rest use the cache', async () => {
    const source = memorySource({ secrets: [A] })
    const { send, runs } = receiverOf(source)
    const answers = await Promise.all(Array.from({ length: 5 }, () => send(A)))
    for (let i = 0; i < 20; i++) answers.push(await send(A))
    expect(answers.map((a) => a.status)).toEqual(Array(25).fill(200))
    expect(runs).toHaveLength(25)
    expect(source.reads).toBe(1)
  })

  it('re-reads on a mismatch and verifies with the new secret: a rotation is never answered 401', async () => {
    const source = memorySource({ secrets: [A] })
    const { send } = receiverOf(source)
    expect((await send(A)).status).toBe(200)
    source.write({ secrets: [B] }) // another process rotated
    const rotated = await send(B)
    expect([rotated.status, code(rotated)]).toEqual([200, undefined])
    expect(source.reads).toBe(2)
    // A's deliveries are refused now, after their own re-read.
    const old = await send(A)
    expect([old.status, code(old)]).toEqual([401, 'invalid_signature'])
  })

  it('re-reads once for 50 concurrent mismatches (single-flight)', async () => {
    const source = memorySource({ secrets: [A] })
    const { send, runs } = receiverOf(source)
    expect((await send(A)).status).toBe(200)
    source.write({ secrets: [B, A] })
    const before = source.reads
    const answers = await Promise.all(Array.from({ length: 50 }, () => send(B)))
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200))
    expect(runs).toHaveLength(51)
    expect(source.reads - before).toBeGreaterThanOrEqual(1)
    expect(source.reads - before).toBeLessThanOrEqual(2)
    // Forged deliveries cannot make it read more than once per spacing either.
    const reads = source.reads
    const forged = await Promise.all(Array.from({ length: 50 }, () => send(FORGED)))
    expect(forged.map(code)).toEqual(Array(50).fill('invalid_signature'))
    expect(source.reads - reads).toBeLessThanOrEqual(2)
  })

  it('does not trust a read that started before the delivery arrived: it waits for the next one', async () => {
    const source = memorySource({ secrets: [A] })
    const { send } = receiverOf(source)
    expect((await send(A)).status).toBe(200)
    // A forged delivery starts a re-read, held open; it has already taken the state holding only A.
    const gate = deferred()
    source.gate = gate.promise
    const forged = send(FORGED)
    await sleep(60)
    expect(source.reads).toBe(2)
    // The rotation lands while that read is in flight, and a delivery signed with the new secret arrives.
    source.write({ secrets: [B] })
    const rotated = send(B)
    await sleep(20)
    source.gate = undefined
    gate.open()
    expect(code(await forged)).toBe('invalid_signature')
    const answer = await rotated
    expect([answer.status, code(answer)]).toEqual([200, undefined])
    expect(source.reads).toBe(3)
  })

  it('answers 503 secret_pending with Retry-After while a change is pending, then 200 once the secret is written', async () => {
    const source = memorySource({ secrets: [A], pendingUntil: Date.now() + 60_000 })
    const { send, receiver, lines } = receiverOf(source, { retryAfterSeconds: 3 })
    const pending = await send(B, PENDING_ID)
    expect([pending.status, code(pending), pending.headers['retry-after']]).toEqual([503, 'secret_pending', '3'])
    expect(lines.join('\n')).toMatch(new RegExp(`503 secret_pending \\(delivery ${PENDING_ID}\\): .*pending`))
    // The old secret still verifies meanwhile.
    expect((await send(A)).status).toBe(200)
    source.write({ secrets: [B, A] })
    const retried = await send(B, PENDING_ID)
    expect(retried.status).toBe(200)
    expect((await receiver.stats()).codes).toMatchObject({ secret_pending: 1 })
    // Once the change is over, a mismatch is the usual 401.
    source.write({ secrets: [B] })
    expect(code(await send(FORGED))).toBe('invalid_signature')
  })

  it('honours pendingUntil for at most maxPendingMs from the read that first saw it', async () => {
    const source = memorySource({ secrets: [A], pendingUntil: Date.now() + 3_600_000 })
    const { send } = receiverOf(source, { maxPendingMs: 150 })
    expect(code(await send(B))).toBe('secret_pending')
    await sleep(200)
    const after = await send(B)
    expect([after.status, code(after)]).toEqual([401, 'invalid_signature'])
  })

  it('an endpoint being registered (no secret yet, pending): 503 secret_pending until the secret is written', async () => {
    const source = memorySource({ secrets: [], pendingUntil: Date.now() + 60_000 })
    const { send, runs } = receiverOf(source)
    for (let i = 0; i < 3; i++) expect(code(await send(B, FIRST_ID))).toBe('secret_pending')
    source.write({ secrets: [B] })
    expect((await send(B, FIRST_ID)).status).toBe(200)
    expect(runs).toEqual([FIRST_ID])
  })

  it('a source that cannot be read: 503 secret_lookup_failed with Retry-After, and a read that hangs is cut off', async () => {
    let fail = true
    const source: SecretSource = { read: () => (fail ? Promise.reject(new Error('ECONNREFUSED 127.0.0.1:6379')) : { secrets: [A] }) }
    const { send, receiver } = receiverOf(source)
    const refused = await send(A)
    expect([refused.status, code(refused), refused.headers['retry-after']]).toEqual([503, 'secret_lookup_failed', '5'])
    fail = false
    await sleep(30)
    expect((await send(A)).status).toBe(200)
    expect((await receiver.stats()).consecutiveFailures).toBe(0)

    const hanging = receiverOf({ read: () => new Promise<SecretState>(() => {}) }, { secretReadTimeoutMs: 50 })
    const timedOut = await hanging.send(A)
    expect([timedOut.status, code(timedOut)]).toEqual([503, 'secret_lookup_failed'])
    expect(hanging.lines.join('\n')).toMatch(/did not answer in time/)
  })

  it('garbage in the source: 503 with a line saying so, never quoting the value', async () => {
    const garbage: unknown[] = [
      null,
      'svc_whsec_GarbageMarker1',
      { secrets: 'svc_whsec_GarbageMarker2' },
      { secrets: [' svc_whsec_GarbageMarker3'] },
      { secrets: ['svc_whsec_GarbageMarker4', ''] },
      { secrets: ['svc_whsec_GarbageMarker5'], pendingUntil: 'soon' },
      { secrets: [] },
      { secrets: [], pendingUntil: Date.now() - 1000 },
    ]
    for (const state of garbage) {
      const { send, lines } = receiverOf(memorySource(state))
      const answer = await send(A)
      expect([answer.status, code(answer)], JSON.stringify(state)).toEqual([503, 'secret_lookup_failed'])
      const log = lines.join('\n')
      expect(log).toMatch(/503 secret_lookup_failed .*The secret source holds an unusable value: .*\(the value is not shown\)/)
      expect(log).not.toContain('GarbageMarker')
    }
  })

  it('keeps serving the cached secrets when a background refresh fails, and says so once', async () => {
    const source = memorySource({ secrets: [A] })
    let fail = false
    const flaky: SecretSource = { read: () => (fail ? Promise.reject(new Error('timeout')) : source.read()) }
    const { send, lines } = receiverOf(flaky, { secretRefreshMs: 30 })
    expect((await send(A)).status).toBe(200)
    fail = true
    for (let i = 0; i < 6; i++) {
      await sleep(25)
      expect((await send(A)).status).toBe(200)
    }
    expect(lines.filter((l) => l.includes('refreshing the secret source failed'))).toHaveLength(1)
    fail = false
    source.write({ secrets: [B] })
    await sleep(40)
    await send(B)
    expect(lines.some((l) => l.includes('answers again'))).toBe(true)
  })

  it('refreshes a cached state in the background: a removed secret stops verifying', async () => {
    const source = memorySource({ secrets: [B, A] })
    const { send } = receiverOf(source, { secretRefreshMs: 30 })
    expect((await send(A)).status).toBe(200)
    source.write({ secrets: [B] })
    await sleep(50)
    await send(B) // starts the refresh, answered from the cache
    await sleep(20)
    expect(code(await send(A))).toBe('invalid_signature')
  })

  it('a source per tenant through a `secret` function: each read and rotated on its own, never crossing', async () => {
    const sources = new Map([
      ['a', memorySource({ secrets: [A] })],
      ['b', memorySource({ secrets: [B] })],
    ])
    const runs: string[] = []
    const receiver = createWebhookReceiver<{ tenant: string }>({
      secret: (req) => sources.get(req.tenant),
      endpoint: (req) => req.tenant,
      secretRereadMs: 20,
      log: false,
      on: { 'message.received': (_e, d) => void runs.push(d.id) },
    })
    const transport = {
      method: () => 'POST',
      header: (r: { headers: Record<string, string> }, name: string) => r.headers[name],
      body: (r: { body: Uint8Array }) => r.body,
    }
    const send = async (tenant: string, secret: string) => {
      const d = await delivery(secret)
      return receiver.receive({ tenant, headers: d.headers, body: d.body } as never, transport as never)
    }
    for (let i = 0; i < 5; i++) {
      expect((await send('a', A)).status).toBe(200)
      expect((await send('b', B)).status).toBe(200)
    }
    expect([sources.get('a')!.reads, sources.get('b')!.reads]).toEqual([1, 1])
    expect(code(await send('a', B))).toBe('invalid_signature')
    expect(code(await send('nobody', A))).toBe('unknown_endpoint')
    const rotated = 'svc_whsec_SourceTestSecretA2A2A2A2A2'
    sources.get('a')!.write({ secrets: [rotated] })
    expect((await send('a', rotated)).status).toBe(200)
    expect((await send('b', B)).status).toBe(200)
    expect(sources.get('b')!.reads).toBe(1)
    expect(runs).toHaveLength(12)
  })

  it('verifyWebhook and the verify-only entries read the source the same way', async () => {
    const source = memorySource({ secrets: [A] })
    const options = { secret: source, secretRereadMs: 20, pendingHoldMs: 30 }
    const first = await delivery(A)
    expect((await verifyWebhook(first, options)).event.event).toBe('message.received')
    source.write({ secrets: [B] })
    const second = await delivery(B)
    expect((await verifyWebhook(second, options)).id).toBe(second.headers['svc-webhook-id'])
    expect(source.reads).toBe(2)
    source.write({ secrets: [A], pendingUntil: Date.now() + 60_000 })
    const third = await delivery(FORGED)
    const request = new Request('http://127.0.0.1/', { method: 'POST', body: third.body as Uint8Array<ArrayBuffer>, headers: third.headers })
    await expect(verifyRequest(request, options)).rejects.toMatchObject({ code: 'secret_pending', status: 503 })
  })

  it('rejects invalid source options when created', () => {
    const source = memorySource({ secrets: [A] })
    for (const bad of [{ secretRefreshMs: 0 }, { secretRereadMs: -1 }, { secretReadTimeoutMs: Number.NaN }, { maxPendingMs: '60000' }]) {
      expect(() => createWebhookReceiver({ secret: source, on: {}, ...(bad as object) }), JSON.stringify(bad)).toThrow(TypeError)
    }
    expect(() => createWebhookReceiver({ secret: {} as SecretSource, on: {} })).toThrow(/`secret` is required/)
  })
})

describe('a secret source through svc-webhooks/node over real HTTP', () => {
  let server: RunningServer
  const source = memorySource({ secrets: [A] })
  const runs: string[] = []
  beforeAll(async () => {
    server = await listen(createNodeHandler({ secret: source, secretRereadMs: 20, log: false, on: { 'message.received': (_e, d) => void runs.push(d.id) } }))
  })
  afterAll(async () => {
    await server?.close()
  })

  const post = async (secret: string, id?: Id) => {
    const signed = await signWebhook({ secret, event: sampleEvent('message.received'), ...(id ? { id } : {}) })
    const res = await fetch(server.url, { method: 'POST', body: signed.body, headers: signed.headers })
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { code?: string } }
  }

  it('goes through a rotation (pending, [new, old], [new]) with no 401 and no 503 to a genuine delivery', async () => {
    expect((await post(A)).status).toBe(200)
    source.write({ secrets: [A], pending: [{ id: 'rotation-1', owner: 'test', forMs: 60_000 }] })
    // Signed with the new secret before it is stored: held while the source is re-read, then verified.
    const early = post(B, ROTATION_ID)
    await sleep(300)
    source.write({ secrets: [B, A] })
    expect((await early).status).toBe(200)
    expect((await post(B, ROTATION_ID)).status).toBe(200)
    expect((await post(A)).status).toBe(200)
    source.write({ secrets: [B] })
    expect((await post(B)).status).toBe(200)
    expect(runs.filter((id) => id === ROTATION_ID)).toHaveLength(1)
  })
})

describe('the `secret` function\'s key cache', () => {
  it('keeps one tenant\'s "a\\nb" apart from another\'s ["a", "b"]', async () => {
    const tenants: Record<string, string | string[]> = { list: [A, B], joined: `${A}\n${B}` }
    const transport = {
      method: () => 'POST',
      header: (r: { headers: Record<string, string> }, name: string) => r.headers[name],
      body: (r: { body: Uint8Array }) => r.body,
    }
    for (const order of [['list', 'joined'], ['joined', 'list']]) {
      const receiver = createWebhookReceiver<{ tenant: string }>({ secret: (r) => tenants[r.tenant], endpoint: (r) => r.tenant, log: false, on: { 'message.received': () => {} } })
      const send = async (tenant: string, secret: string) => {
        const d = await delivery(secret)
        return receiver.receive({ tenant, headers: d.headers, body: d.body } as never, transport as never)
      }
      for (const tenant of order) {
        const answer = await send(tenant, A)
        expect([tenant, answer.status]).toEqual([tenant, tenant === 'list' ? 200 : 401])
      }
    }
  })
})

describe('a deadline on the `secret` and `endpoint` functions', () => {
  const never = () => new Promise<never>(() => {})
  const send = async (options: Partial<WebhookReceiverOptions>) => {
    const lines: string[] = []
    const receiver = createWebhookReceiver({ secret: A, on: { 'message.received': () => {} }, secretReadTimeoutMs: 50, log: (line) => lines.push(line), ...options } as WebhookReceiverOptions)
    const signed = await signWebhook({ secret: A, event: sampleEvent('message.received') })
    return { answer: await receiver.handle({ method: 'POST', body: signed.body, headers: signed.headers }), lines }
  }

  it('a `secret` function that never answers is 503 secret_lookup_failed with Retry-After after secretReadTimeoutMs, not a request held past the sender\'s 10 s', async () => {
    const { answer, lines } = await send({ secret: never, endpoint: 'shop' })
    expect(answer.status).toBe(503)
    expect(JSON.parse(answer.body)).toEqual({ ok: false, code: 'secret_lookup_failed' })
    expect(Number(answer.headers['retry-after'])).toBeGreaterThan(0)
    expect(lines.join('\n')).toMatch(/did not answer within secretReadTimeoutMs/)
  })

  it('an `endpoint` function that never answers is 503 secret_lookup_failed too', async () => {
    const { answer } = await send({ secret: () => A, endpoint: never })
    expect(answer.status).toBe(503)
    expect(JSON.parse(answer.body)).toEqual({ ok: false, code: 'secret_lookup_failed' })
  })
})
