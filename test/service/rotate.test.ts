/**
 * rotateEndpointSecret, finishEndpointRotation and registerEndpoint, step by step against an
 * in-memory service client and secret source (test/service/fakes.ts): the pending mark before
 * the call, `[new, old]` then `[new]`, every failure path and the state it leaves, the re-run that
 * repairs a crash between steps, and no secret in a log line, an error or a return value.
 */
import { describe, expect, it } from 'vitest'
import { EndpointLifecycleError, finishEndpointRotation, registerEndpoint, rotateEndpointSecret } from 'svc-webhooks/service'
import { fakeService, MemorySource, type FakeService } from './fakes.js'

const OLD = 'svc_whsec_old_secret_value'
const NOW = 1_750_000_000_000

function setup(state: { secrets: string[]; pendingUntil?: number } | undefined = { secrets: [OLD] }) {
  const fake = fakeService({ label: 'orders' })
  const endpointId = [...fake.endpoints.keys()][0]!
  // Secrets named in the step log: `old`, or `s<n>` for the fake's n-th secret (s1 is the endpoint's first).
  const name = (secret: string) => (secret === OLD ? 'old' : `s${fake.secretsMade.indexOf(secret) + 1}`)
  const source = new MemorySource(state, fake.steps, name)
  const lines: string[] = []
  return { fake, endpointId, source, lines, log: (line: string) => void lines.push(line), current: () => fake.endpoints.get(endpointId)!.secret }
}

/** Everything a caller or an operator sees: no secret may be in any of it. */
function expectNoSecret(fake: FakeService, seen: unknown[]): void {
  const text = seen.map((value) => (value instanceof Error ? `${value.message} ${JSON.stringify(value)}` : JSON.stringify(value))).join('\n')
  for (const secret of [...fake.secretsMade, OLD]) expect(text).not.toContain(secret)
  expect(text).not.toContain('svc_pat_')
}

describe('rotateEndpointSecret', () => {
  it('marks the source pending, calls rotate-secret, stores [new, old], then [new] after graceMs', async () => {
    const { fake, endpointId, source, lines, log, current } = setup()
    let pendingAtCall: number | undefined
    fake.onCall = () => void (pendingAtCall = source.state?.pendingUntil)
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 30, pendingMs: 45_000, now: () => NOW, log })

    expect(pendingAtCall).toBe(NOW + 45_000)
    expect(fake.steps).toEqual(['write [old] pending', 'rotateSecret', 'write [s2, old]'])
    expect(source.state).toEqual({ secrets: [current(), OLD] })
    expect(rotation.endpoint.id).toBe(endpointId)
    expect(rotation.endpoint).not.toHaveProperty('signing_secret')
    expect(rotation.trimAt).toBe(NOW + 30)

    await rotation.finished
    expect(fake.steps.at(-1)).toBe('write [s2]')
    expect(source.state).toEqual({ secrets: [current()] })
    expectNoSecret(fake, [rotation, lines])
  })

  it('defaults: pending for 60 s, the old secret kept 5 minutes', async () => {
    const { fake, endpointId, source } = setup()
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, now: () => NOW, log: false })
    expect(rotation.trimAt).toBe(NOW + 300_000)
    expect(fake.steps[0]).toBe('write [old] pending')
  })

  it('a refusal (4xx) puts the old state back with nothing pending, and throws code refused with the status', async () => {
    const { fake, endpointId, source, lines, log } = setup()
    fake.faults.rotateSecret = [{ status: 403, code: 'forbidden' }]
    const error = await rotateEndpointSecret({ service: fake.service, endpointId, source, log }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EndpointLifecycleError)
    expect(error).toMatchObject({ code: 'refused', status: 403 })
    expect(fake.calls.rotateSecret).toBe(1)
    expect(source.state).toEqual({ secrets: [OLD] })
    expect(fake.steps).toEqual(['write [old] pending', 'rotateSecret', 'write [old]'])
    expectNoSecret(fake, [error, lines])
  })

  it('an answer lost or refused with 5xx is asked again, with the pending mark renewed before each try; the last answer is the secret', async () => {
    const { fake, endpointId, source, lines, log, current } = setup()
    // The first call rotated at the service and its answer was lost; the second got a 503.
    fake.faults.rotateSecret = [{ when: 'after', lost: true }, { status: 503, when: 'before', lost: true }]
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 0, log })
    expect(fake.calls.rotateSecret).toBe(3)
    expect(fake.steps.slice(0, 7)).toEqual([
      'write [old] pending', 'rotateSecret', 'write [old] pending', 'rotateSecret', 'write [old] pending', 'rotateSecret', 'write [s3, old]',
    ])
    // s2 was made by the lost answer: nobody has it, and nobody guesses it.
    expect(source.state!.secrets[0]).toBe(current())
    expect(lines.filter((line) => line.includes('asking again'))).toHaveLength(2)
    await rotation.finished
    expect(source.state).toEqual({ secrets: [current()] })
    expectNoSecret(fake, [rotation, lines])
  })

  it('no answer after every attempt: throws outcome_unknown and leaves the source pending; a re-run repairs it', async () => {
    const { fake, endpointId, source, lines, log, current } = setup()
    fake.faults.rotateSecret = [{ when: 'after', lost: true }, { when: 'after', lost: true }]
    const error = await rotateEndpointSecret({ service: fake.service, endpointId, source, attempts: 2, log }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'outcome_unknown' })
    // The service holds a secret nobody has; the receivers answer 503 (retried) until pendingUntil.
    expect(source.state!.secrets).toEqual([OLD])
    expect(source.state!.pendingUntil).toBeGreaterThan(Date.now())

    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 0, log })
    expect(source.state).toEqual({ secrets: [current(), OLD] })
    await rotation.finished
    expect(source.state).toEqual({ secrets: [current()] })
    expect(lines.some((line) => line.includes('already pending'))).toBe(true)
    expectNoSecret(fake, [error, rotation, lines])
  })

  it('a crash after the call (the new secret never stored) leaves the source pending; the next run rotates again', async () => {
    const { fake, endpointId, source, lines, log, current } = setup()
    // The process "dies" as it writes [new, old]: every write after the pending mark fails.
    fake.onCall = () => void (source.failWrites = 3)
    const error = await rotateEndpointSecret({ service: fake.service, endpointId, source, log }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'source_failed' })
    // Still pending, its mark flagged: the service holds a secret nobody has.
    expect(source.state).toMatchObject({ secrets: [OLD], pending: [{ outcomeUnknown: true }] })
    fake.onCall = undefined

    // The next run's answer settles the flagged mark: it retires it.
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 0, log })
    await rotation.finished
    expect(source.state).toEqual({ secrets: [current()] })
    expect(fake.calls.rotateSecret).toBe(2)
    expectNoSecret(fake, [error, rotation, lines])
  })

  it('a crash during the grace period leaves [new, old]: finishEndpointRotation drops the old one, unless a change is pending', async () => {
    const source = new MemorySource({ secrets: ['svc_whsec_new', OLD] })
    expect(await finishEndpointRotation({ source })).toBe(true)
    expect(source.state).toEqual({ secrets: ['svc_whsec_new'] })
    expect(await finishEndpointRotation({ source })).toBe(false)

    const pending = new MemorySource({ secrets: ['svc_whsec_new', OLD], pendingUntil: Date.now() + 60_000 })
    expect(await finishEndpointRotation({ source: pending })).toBe(false)
    expect(pending.state!.secrets).toHaveLength(2)
  })

  it('a rotation from a leftover [new, old] keeps both through its grace period, then drops every secret it found', async () => {
    const { fake, endpointId, source, current } = setup({ secrets: ['svc_whsec_previous', OLD] })
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 20, log: false })
    expect(source.state).toEqual({ secrets: [current(), 'svc_whsec_previous', OLD] })
    await rotation.finished
    expect(source.state).toEqual({ secrets: [current()] })
  })

  it('the grace step does not undo a newer rotation that began meanwhile', async () => {
    const { fake, endpointId, source, current } = setup()
    const first = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 40, log: false })
    const second = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 200, log: false })
    await first.finished
    expect(source.state!.secrets).toHaveLength(2)
    expect(source.state!.secrets[0]).toBe(current())
    await second.finished
    expect(source.state).toEqual({ secrets: [current()] })
  })

  it('a source that cannot be marked pending stops the rotation before the service is called', async () => {
    const { fake, endpointId, source } = setup()
    // A write that fails is tried three times.
    source.failWrites = 3
    await expect(rotateEndpointSecret({ service: fake.service, endpointId, source, log: false })).rejects.toMatchObject({ code: 'source_failed' })
    expect(fake.calls.rotateSecret).toBeUndefined()
    source.failReads = true
    await expect(rotateEndpointSecret({ service: fake.service, endpointId, source, log: false })).rejects.toMatchObject({ code: 'source_failed' })
    expect(fake.calls.rotateSecret).toBeUndefined()
  })

  it('a source written for an earlier version (write answers nothing, checks nothing) still rotates, and the log says once that two runs are not protected', async () => {
    const { fake, endpointId, source, lines, log, current } = setup()
    source.unconditional = true
    const rotation = await rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: 0, log })
    await rotation.finished
    expect(source.state).toEqual({ secrets: [current()] })
    expect(lines.filter((line) => line.includes('does not say whether it wrote'))).toHaveLength(1)
  })

  it('rejects invalid options at the call', async () => {
    const { fake, endpointId, source } = setup()
    const readOnly = { read: () => ({ secrets: [OLD] }) }
    await expect(rotateEndpointSecret({ service: fake.service, endpointId, source: readOnly })).rejects.toThrow(TypeError)
    await expect(rotateEndpointSecret({ service: fake.service, endpointId: '', source })).rejects.toThrow(/endpointId/)
    await expect(rotateEndpointSecret({ service: fake.service, endpointId, source, graceMs: -1 })).rejects.toThrow(/graceMs/)
    await expect(rotateEndpointSecret({ service: fake.service, endpointId, source, attempts: 0 })).rejects.toThrow(/attempts/)
    await expect(rotateEndpointSecret({ service: {} as never, endpointId, source })).rejects.toThrow(/createServiceClient/)
    expect(fake.steps).toEqual([])
  })
})

describe('registerEndpoint', () => {
  const url = 'https://example.com/webhooks/svc'

  it('marks the source pending with no secret, creates the endpoint, then stores its secret', async () => {
    const fake = fakeService()
    const source = new MemorySource(undefined, fake.steps, (s) => `s${fake.secretsMade.indexOf(s) + 1}`)
    let atCreate: unknown
    fake.onCall = () => void (atCreate = source.state)
    const endpoint = await registerEndpoint({ service: fake.service, url, label: 'orders', subscribedEvents: ['message.received'], source, now: () => NOW, log: false })
    expect(atCreate).toEqual({ secrets: [], pending: [{ id: expect.any(String), owner: expect.any(String), forMs: 60_000, known: [] }], pendingUntil: NOW + 60_000 })
    // The endpoints of this URL that exist before are listed first, and kept on the mark.
    expect(fake.steps).toEqual(['list', 'write [] pending', 'create', 'write [s1]'])
    expect(endpoint).toMatchObject({ url, label: 'orders', subscribed_events: ['message.received'] })
    expect(endpoint).not.toHaveProperty('signing_secret')
    expect(source.state).toEqual({ secrets: [fake.endpoints.get(endpoint.id)!.secret] })
    expectNoSecret(fake, [endpoint])
  })

  it('a refusal (422) leaves no secret and nothing pending, and throws code refused', async () => {
    const fake = fakeService()
    const source = new MemorySource(undefined, fake.steps)
    fake.faults.create = [{ status: 422, code: 'validation' }]
    await expect(registerEndpoint({ service: fake.service, url: 'http://127.0.0.1/x', source, log: false })).rejects.toMatchObject({ code: 'refused', status: 422 })
    expect(source.state).toEqual({ secrets: [] })
    expect(fake.endpoints.size).toBe(0)
  })

  it('a lost answer to create: the next attempt finds the endpoint by URL and rotates it, never creating a second', async () => {
    const fake = fakeService()
    const source = new MemorySource(undefined, fake.steps)
    const lines: string[] = []
    fake.faults.create = [{ when: 'after', lost: true }]
    const endpoint = await registerEndpoint({ service: fake.service, url, source, log: (line) => void lines.push(line) })
    expect(fake.endpoints.size).toBe(1)
    expect(fake.steps.filter((s) => !s.startsWith('write'))).toEqual(['list', 'create', 'list', 'rotateSecret'])
    expect(source.state).toEqual({ secrets: [fake.endpoints.get(endpoint.id)!.secret] })
    expectNoSecret(fake, [endpoint, lines])
  })

  it('a re-run after a crash between create and the write rotates the endpoint it made', async () => {
    const fake = fakeService()
    const source = new MemorySource(undefined, fake.steps)
    fake.onCall = (operation) => void (operation === 'create' && (source.failWrites = 3))
    await expect(registerEndpoint({ service: fake.service, url, source, log: false })).rejects.toMatchObject({ code: 'source_failed' })
    expect(source.state).toMatchObject({ secrets: [], pending: [{ known: [] }] })
    fake.onCall = undefined
    const endpoint = await registerEndpoint({ service: fake.service, url, source, log: false })
    expect(fake.endpoints.size).toBe(1)
    expect(source.state).toEqual({ secrets: [fake.endpoints.get(endpoint.id)!.secret] })
  })

  it('a source that cannot be read is an outage, not an empty source: nothing is called or written', async () => {
    const fake = fakeService()
    // A state an earlier version stored, with no version to guard a write.
    const source = new MemorySource({ secrets: [OLD] }, fake.steps)
    source.failReads = true
    await expect(registerEndpoint({ service: fake.service, url, source, log: false })).rejects.toMatchObject({ code: 'source_failed', message: expect.stringContaining('could not be read') })
    expect(fake.steps).toEqual([])
    expect(source.state).toEqual({ secrets: [OLD] })
  })

  it('refuses a source that already holds a secret: that is a rotation', async () => {
    const fake = fakeService()
    const source = new MemorySource({ secrets: [OLD] }, fake.steps)
    await expect(registerEndpoint({ service: fake.service, url, source, log: false })).rejects.toMatchObject({ code: 'source_failed' })
    expect(fake.steps).toEqual([])
  })
})
