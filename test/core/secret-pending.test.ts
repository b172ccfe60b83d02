/**
 * The pending rules of a secret source in the receiver, through the built package, with the
 * source's answers and the receiver's clock driven by the test: a mismatch while a change is
 * pending is held while the source is re-read and answered 2xx once the new secret is there (503
 * `secret_pending` only when the hold runs out); each pending mark is timed from when this
 * receiver first saw it, so a mark seen before never shortens a later one, and a time written by a
 * host whose clock is behind never shortens it either.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, type SecretState, type WebhookResponse } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const A = 'svc_whsec_PendingTestSecretAAAAAAAAA'
const B = 'svc_whsec_PendingTestSecretBBBBBBBBB'
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))
const code = (answer: WebhookResponse) => (JSON.parse(answer.body) as { code?: string }).code

/** A source another process writes; the receiver's clock is `clock.now`, moved by the test. */
function setup(initial: SecretState, options: { pendingHoldMs?: number; maxPendingMs?: number } = {}) {
  let state = initial
  const clock = { now: 1_750_000_000_000 }
  const source = { read: () => state, write: (next: SecretState) => void (state = next) }
  const runs: string[] = []
  const receiver = createWebhookReceiver({
    secret: source,
    secretRereadMs: 20,
    now: () => clock.now,
    // The signature's timestamp is checked against this clock too: a tolerance as wide as the test's jumps.
    toleranceSeconds: 1_000_000,
    log: false,
    on: { 'message.received': (_event, d) => void runs.push(d.id) },
    ...options,
  })
  const send = async (secret: string, id = randomUUID()) => {
    const signed = await signWebhook({ secret, event: sampleEvent('message.received'), id, timestamp: Math.floor(clock.now / 1000) })
    return receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
  }
  return { source, clock, send, runs }
}

const mark = (id: string, forMs = 60_000) => ({ id, owner: 'rotation', forMs })

describe('a pending mismatch is held, then verified', () => {
  it('answers 2xx, not 503, when the new secret is stored while the delivery is held', async () => {
    const { source, send, runs } = setup({ secrets: [A], pending: [mark('m1')] })
    expect((await send(A)).status).toBe(200)
    // Signed with the new secret before it is stored: the rotation's call is still on its way back.
    const started = Date.now()
    const early = send(B)
    await sleep(400)
    source.write({ secrets: [B, A] })
    const answer = await early
    expect([answer.status, code(answer)]).toEqual([200, undefined])
    expect(Date.now() - started).toBeGreaterThanOrEqual(350)
    expect(runs).toHaveLength(2)
  })

  it('answers 503 secret_pending with Retry-After only once the hold runs out', async () => {
    const { send } = setup({ secrets: [A], pending: [mark('m1')] }, { pendingHoldMs: 300 })
    const started = Date.now()
    const answer = await send(B)
    expect([answer.status, code(answer), answer.headers['retry-after']]).toEqual([503, 'secret_pending', '5'])
    expect(Date.now() - started).toBeGreaterThanOrEqual(280)
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it('is refused 401 at once when nothing is pending, and when the mark is removed while it is held', async () => {
    const { source, send } = setup({ secrets: [A] })
    const started = Date.now()
    expect(code(await send(B))).toBe('invalid_signature')
    expect(Date.now() - started).toBeLessThan(1_000)
    source.write({ secrets: [A], pending: [mark('m1')] })
    const held = send(B)
    await sleep(200)
    source.write({ secrets: [A] })
    expect(code(await held)).toBe('invalid_signature')
  })
})

describe('pending is timed on this receiver\'s clock, per mark', () => {
  it('a second rotation\'s mark gets its own window, not what is left of the first one\'s (marks)', async () => {
    const { source, clock, send } = setup({ secrets: [A], pending: [mark('rotation-1')] }, { pendingHoldMs: 30 })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 59_000
    // Rotation 1 ended and rotation 2 began between two reads of this receiver.
    source.write({ secrets: [A], pending: [mark('rotation-2')] })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 2_000
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 60_000
    expect(code(await send(B))).toBe('invalid_signature')
  })

  it('a second rotation\'s mark gets its own window, not what is left of the first one\'s (pendingUntil, the older form)', async () => {
    const { source, clock, send } = setup({ secrets: [A], pendingUntil: 1_750_000_000_000 + 600_000 }, { pendingHoldMs: 30 })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 59_000
    source.write({ secrets: [A], pendingUntil: clock.now + 600_000 })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 2_000
    expect(code(await send(B))).toBe('secret_pending')
  })

  it('a mark is honoured for its own forMs, at most maxPendingMs, from the read that first saw it', async () => {
    const { source, clock, send } = setup({ secrets: [A] }, { pendingHoldMs: 30, maxPendingMs: 10_000 })
    expect(code(await send(B))).toBe('invalid_signature')
    source.write({ secrets: [A], pending: [mark('short', 3_000), mark('long', 3_600_000)] })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 5_000
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 5_001
    expect(code(await send(B))).toBe('invalid_signature')
  })

  it('a mark written by a host whose clock is 90 s behind is honoured in full (no absolute time in it)', async () => {
    // What a host 90 s behind wrote in the older form: its own now + 60 s, already past here.
    const { source, clock, send } = setup({ secrets: [A] }, { pendingHoldMs: 30 })
    expect(code(await send(B))).toBe('invalid_signature')
    source.write({ secrets: [A], pending: [mark('skewed')] })
    expect(code(await send(B))).toBe('secret_pending')
    clock.now += 30_000
    expect(code(await send(B))).toBe('secret_pending')
  })
})
