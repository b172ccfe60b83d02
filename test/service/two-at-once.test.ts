/**
 * Rotation and registration when two things happen at once (DESIGN.md "Two things at once"),
 * against the in-memory service and a versioned in-memory source (test/service/fakes.ts), each
 * race driven on cue: a service answer held until the test lets it go, a write that lets another
 * writer in first. What is checked each time is what a receiver does with a genuine delivery
 * signed with the secret the service holds at the end: never a permanent 401.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, type SecretSource } from 'svc-webhooks'
import { registerEndpoint, rotateEndpointSecret, type ServiceClient } from 'svc-webhooks/service'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { fakeService, MemorySource, until } from './fakes.js'

const OLD = 'svc_whsec_two_at_once_old_secret'

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void
  const promise = new Promise<void>((done) => (open = done))
  return { promise, open }
}

/** A receiver reading `source`, with a short hold so a pending mismatch is answered 503 quickly. */
function receiverOn(source: SecretSource, pendingHoldMs = 50) {
  const receiver = createWebhookReceiver({ secret: source, secretRereadMs: 10, pendingHoldMs, log: false, on: { 'message.received': () => undefined } })
  return async (secret: string) => {
    const signed = await signWebhook({ secret, event: sampleEvent('message.received'), id: randomUUID() })
    const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    return `${answer.status} ${(JSON.parse(answer.body) as { code?: string }).code ?? 'ok'}`
  }
}

/** The same service, with rotate-secret's answer held (after the service acted) until `held` opens. */
function answerHeld(service: ServiceClient, held: Promise<void>): ServiceClient {
  return {
    ...service,
    endpoints: {
      ...service.endpoints,
      rotateSecret: async (id, options) => {
        const answer = await service.endpoints.rotateSecret(id, options)
        await held
        return answer
      },
    },
  }
}

describe('two rotations at once', () => {
  it('the one the service answered last holds the secret, whatever order the writes land in', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    const late = gate()
    // A rotates first at the service, but its answer comes back last.
    const first = rotateEndpointSecret({ service: answerHeld(fake.service, late.promise), endpointId, source, graceMs: 60_000, log: false })
    await until(() => fake.calls.rotateSecret === 1)
    const second = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 60_000, log: false })
    late.open()
    await first
    const current = fake.endpoints.get(endpointId)!.secret
    expect(source.state!.secrets).toContain(current)
    expect(source.state!.pending ?? []).toEqual([])
    const send = receiverOn(source)
    expect(await Promise.all([send(current), send(current), send(current)])).toEqual(['200 ok', '200 ok', '200 ok'])
    expect(second.endpoint.id).toBe(endpointId)
  })

  it('a run that finishes first removes only its own mark: the other run\'s stays until that run stores its answer', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    const held = gate()
    const slow = rotateEndpointSecret({ service: answerHeld(fake.service, held.promise), endpointId, source, graceMs: 60_000, log: false })
    await until(() => fake.calls.rotateSecret === 1)
    const slowMark = source.state!.pending![0]!
    await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 60_000, log: false })
    expect(source.state!.pending).toEqual([slowMark])
    held.open()
    await slow
    expect(source.state!.pending ?? []).toEqual([])
  })

  it('a run whose write loses to another write reads again and keeps both changes', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    let slipped = false
    // Just before the rotation stores its secret, another writer adds one of its own.
    source.beforeWrite = (state) => {
      if (slipped || state.secrets.length < 2) return
      slipped = true
      source.state = { secrets: ['svc_whsec_written_meanwhile', ...source.state!.secrets], pending: source.state!.pending }
      source.version++
    }
    await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 60_000, log: false })
    expect(source.state!.secrets).toEqual([fake.endpoints.get(endpointId)!.secret, 'svc_whsec_written_meanwhile', OLD])
  })
})

describe('a lost answer, then a refusal', () => {
  it('stays pending (outcome_unknown): the source never goes back to the secret the service stopped', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    // Attempt 1 rotates at the service and its answer is lost; attempt 2 gets a 401 (an expired token).
    fake.faults.rotateSecret = [{ when: 'after', lost: true }, { status: 401, code: 'unauthorized' }]
    const error = await rotateEndpointSecret({ service: fake.service, endpointId, source, log: false }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'outcome_unknown', status: 401 })
    expect((error as Error).message).not.toMatch(/holds what it held before/)
    expect(source.state).toMatchObject({ secrets: [OLD], pending: [{ outcomeUnknown: true }] })
    // The service signs with a secret nobody has: retried (503), never dropped (401).
    const send = receiverOn(source)
    expect(await send(fake.endpoints.get(endpointId)!.secret)).toBe('503 secret_pending')
    // The next run's answer settles it.
    await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 60_000, log: false })
    expect(source.state!.pending ?? []).toEqual([])
    expect(await send(fake.endpoints.get(endpointId)!.secret)).toBe('200 ok')
  })
})

describe('the grace trim beside a rotation in flight', () => {
  it('never wipes the newer rotation\'s pending mark: its early deliveries are held, then verified', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    const first = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 30, log: false })
    const held = gate()
    let second: Promise<unknown> | undefined
    // The trim has read [s1, old] and is about to write [s1]: a second rotation marks the source first.
    source.beforeWrite = async (state) => {
      if (second !== undefined || state.secrets.length !== 1 || (state.pending?.length ?? 0) > 0) return
      second = rotateEndpointSecret({ service: answerHeld(fake.service, held.promise), endpointId, source, graceMs: 60_000, log: false })
      await until(() => fake.calls.rotateSecret === 2)
    }
    await first.finished
    // The second rotation acted at the service; its answer is still on the way.
    expect(source.state!.pending).toHaveLength(1)
    const send = receiverOn(source, 2_000)
    const early = send(fake.endpoints.get(endpointId)!.secret)
    await new Promise((done) => setTimeout(done, 100))
    held.open()
    await second
    expect(await early).toBe('200 ok')
  })
})

describe('a rotating host whose clock is 90 s behind', () => {
  it('leaves the receivers their full pending window: a delivery signed while its call is out is held, then verified', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    const send = receiverOn(source, 3_000)
    expect(await send(OLD)).toBe('200 ok')
    const held = gate()
    const rotation = rotateEndpointSecret({ service: answerHeld(fake.service, held.promise), endpointId, source, graceMs: 60_000, now: () => Date.now() - 90_000, log: false })
    await until(() => fake.calls.rotateSecret === 1)
    const early = send(fake.endpoints.get(endpointId)!.secret)
    await new Promise((done) => setTimeout(done, 200))
    held.open()
    await rotation
    expect(await early).toBe('200 ok')
  })
})

describe('a slow rotate-secret answer', () => {
  it('is cut off after attemptTimeoutMs and asked again: seconds, not a pending window the receivers run out of', async () => {
    const fake = fakeService({ label: 'orders' })
    const endpointId = [...fake.endpoints.keys()][0]!
    const source = new MemorySource({ secrets: [OLD] })
    const never = new Promise<void>(() => undefined)
    let calls = 0
    // The first call acts at the service and never answers; the second answers at once.
    const service: ServiceClient = {
      ...fake.service,
      endpoints: {
        ...fake.service.endpoints,
        rotateSecret: (id, options) => (++calls === 1 ? answerHeld(fake.service, never) : fake.service).endpoints.rotateSecret(id, options),
      },
    }
    const started = Date.now()
    const rotation = await rotateEndpointSecret({ service, endpointId, source, attemptTimeoutMs: 200, graceMs: 60_000, log: false })
    expect(Date.now() - started).toBeLessThan(3_000)
    expect(calls).toBe(2)
    expect(source.state!.secrets[0]).toBe(fake.endpoints.get(endpointId)!.secret)
    expect(rotation.endpoint.id).toBe(endpointId)
  })
})

describe('registerEndpoint resuming', () => {
  it('never rotates another endpoint that has the same URL', async () => {
    const url = 'https://example.com/webhooks/shared'
    // Someone else's endpoint, same URL, made before this registration.
    const fake = fakeService({ url, label: 'someone else' })
    const theirs = [...fake.endpoints.values()][0]!
    const theirSecret = theirs.secret
    const source = new MemorySource(undefined)
    // The first create never reached the service (no answer); the second attempt looks for an earlier one by URL.
    fake.faults.create = [{ when: 'before', lost: true }]
    const endpoint = await registerEndpoint({ service: fake.service, url, source, log: false })
    expect(endpoint.id).not.toBe(theirs.id)
    expect(fake.endpoints.get(theirs.id)!.secret).toBe(theirSecret)
    expect(fake.endpoints.size).toBe(2)
    expect(source.state).toEqual({ secrets: [fake.endpoints.get(endpoint.id)!.secret] })
  })
})
