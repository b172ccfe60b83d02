/**
 * watchEndpoint and the receiver's and worker's `watch` option (endpointWatcher) against an
 * in-memory service client: warnings as the service's count climbs, the disabled line, re-enable
 * only once the receiver is ready (its store or inbox answers, its secret reads, a signed probe
 * passes its own verification), API errors without the token, and stop()/close() ending it all.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createInboxWorker, createWebhookReceiver, MemoryInbox, MemoryStore, verifySignature } from 'svc-webhooks'
import { endpointWatcher, watchEndpoint, type EndpointWatch } from 'svc-webhooks/service'
import { fakeService, MemorySource, until } from './fakes.js'

const SECRET = 'svc_whsec_watch_tests'
const stops: Array<() => unknown> = []
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop()
})

function watched(script: Array<Record<string, unknown>>, extra: Partial<Parameters<typeof watchEndpoint>[0]> = {}) {
  const fake = fakeService({ last_error: null })
  fake.script = script
  const endpointId = [...fake.endpoints.keys()][0]!
  const lines: string[] = []
  const watch = watchEndpoint({ service: fake.service, endpointId, intervalMs: 5, log: (line) => void lines.push(line), ...extra })
  stops.push(() => watch.stop())
  return { fake, endpointId, lines, watch }
}

/** Waits until the scripted list answers are used up (the last one repeats), plus one more read. */
async function scriptDone(fake: ReturnType<typeof fakeService>, reads: number): Promise<void> {
  await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(reads))
}

describe('watchEndpoint', () => {
  it('reads at start and every interval; warns once as consecutive_failures climbs past 5, 10 and 15, again after it falls', async () => {
    const counts = [0, 3, 5, 6, 9, 12, 15, 16, 2, 4, 7, 7]
    const { fake, lines, watch } = watched(counts.map((consecutive_failures) => ({ consecutive_failures })))
    await scriptDone(fake, counts.length + 1)
    const warnings = lines.filter((line) => line.includes('consecutive failed deliveries'))
    expect(warnings.map((line) => /counts (\d+)/.exec(line)![1])).toEqual(['5', '12', '15', '7'])
    expect(warnings.every((line) => line.startsWith('svc-webhooks: endpoint '))).toBe(true)
    expect(watch.view()).toMatchObject({ enabled: true, consecutiveFailures: 7, lastError: null, lastReadAt: expect.any(Number) })
  })

  it('warnAt chooses the levels', async () => {
    const counts = [1, 2, 3]
    const { fake, lines } = watched(counts.map((consecutive_failures) => ({ consecutive_failures })), { warnAt: [2] })
    await scriptDone(fake, counts.length + 1)
    expect(lines.filter((line) => line.includes('consecutive failed deliveries'))).toHaveLength(1)
  })

  it('logs last_error once per disable, and how to enable it when reenable is off', async () => {
    const disabled = { enabled: false, consecutive_failures: 20, last_error: 'connect ECONNREFUSED' }
    const script = [disabled, disabled, disabled, { enabled: true, consecutive_failures: 0 }, disabled, disabled]
    const { fake, lines, watch } = watched(script)
    await scriptDone(fake, script.length + 1)
    const said = lines.filter((line) => line.includes('disabled by the service'))
    expect(said).toHaveLength(2)
    expect(said[0]).toContain('last_error: connect ECONNREFUSED')
    expect(said[0]).toContain('reenable: true')
    expect(fake.calls.enable).toBeUndefined()
    expect(watch.view()).toMatchObject({ enabled: false, lastError: 'connect ECONNREFUSED' })
  })

  it('with reenable, enables the endpoint only once healthy() resolves true', async () => {
    let ready = false
    let checks = 0
    const { fake, lines, watch } = watched([{ enabled: false, consecutive_failures: 20, last_error: 'timeout' }], {
      reenable: true,
      healthy: async () => {
        checks++
        return ready
      },
    })
    await until(() => expect(checks).toBeGreaterThanOrEqual(5))
    expect(fake.calls.enable).toBeUndefined()
    expect(lines.filter((line) => line.includes('not ready'))).toHaveLength(1)
    expect(watch.view().error).toMatch(/not re-enabled/)

    ready = true
    await until(() => expect(fake.calls.enable).toBe(1))
    await until(() => expect(watch.view()).toMatchObject({ enabled: true, consecutiveFailures: 0, reenabledAt: expect.any(Number) }))
    expect(watch.view().error).toBeUndefined()
    expect(lines.some((line) => line.includes('enabled again') && line.includes('resend'))).toBe(true)
  })

  it('a healthy() that throws counts as not ready', async () => {
    const { fake } = watched([{ enabled: false }], { reenable: true, healthy: () => { throw new Error('boom') } })
    await scriptDone(fake, 4)
    expect(fake.calls.enable).toBeUndefined()
  })

  it('API errors are logged once (never the token or the message), kept in the view, and retried next interval', async () => {
    const { fake, lines, watch } = watched([{ consecutive_failures: 1 }])
    fake.faults.list = [{ status: 503, when: 'before', lost: true }, { status: 503, when: 'before', lost: true }, { when: 'before', lost: true }]
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(3))
    expect(watch.view().error).toMatch(/reading it failed: ServiceApiError/)
    await until(() => expect(watch.view().error).toBeUndefined())
    expect(lines.filter((line) => line.includes('reading it failed'))).toHaveLength(1)
    expect(lines.filter((line) => line.includes('answers again'))).toHaveLength(1)
    expect(lines.join('\n')).not.toContain('svc_pat_')
    expect(lines.join('\n')).not.toContain('Bearer')
  })

  it('an endpoint missing from the list is said once', async () => {
    const fake = fakeService()
    const lines: string[] = []
    const watch = watchEndpoint({ service: fake.service, endpointId: 'nope', intervalMs: 5, log: (line) => void lines.push(line) })
    stops.push(() => watch.stop())
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(3))
    expect(watch.view().error).toMatch(/not in the service's list/)
    expect(lines).toHaveLength(1)
  })

  it('stop() clears the timer: no read after it', async () => {
    const { fake, watch } = watched([{}])
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(2))
    watch.stop()
    const reads = fake.calls.list
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(fake.calls.list).toBe(reads)
  })

  it('log: false silences it', async () => {
    const fake = fakeService({ enabled: false, consecutive_failures: 20, last_error: 'x' })
    const original = console.warn
    const seen: unknown[] = []
    console.warn = (...args: unknown[]) => void seen.push(args)
    try {
      const watch = watchEndpoint({ service: fake.service, endpointId: [...fake.endpoints.keys()][0]!, intervalMs: 5, log: false })
      stops.push(() => watch.stop())
      await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(3))
    } finally {
      console.warn = original
    }
    expect(seen).toEqual([])
  })

  it('rejects invalid options at creation', () => {
    const fake = fakeService({})
    const service = fake.service
    expect(() => watchEndpoint({ service: {} as never, endpointId: 'x' })).toThrow(/createServiceClient/)
    expect(() => watchEndpoint({ service, endpointId: '' })).toThrow(/endpointId/)
    expect(() => watchEndpoint({ service, endpointId: 'x', intervalMs: 0 })).toThrow(/intervalMs/)
    expect(() => watchEndpoint({ service, endpointId: 'x', reenable: true })).toThrow(/healthy/)
    expect(() => watchEndpoint({ service, endpointId: 'x', warnAt: [0] })).toThrow(/warnAt/)
    expect(() => endpointWatcher({ service, endpointId: 'x', intervalMs: -1 })).toThrow(/intervalMs/)
    expect(fake.calls.list).toBeUndefined()
  })
})

describe('watchEndpoint: which disables it undoes', () => {
  const byService = { enabled: false, consecutive_failures: 20, last_error: 'HTTP 401', last_delivery_at: null }

  it('disabled again after its re-enable with last_delivery_at unmoved: held back; moved (a delivery got through, unseen): enabled again', async () => {
    const moved = { ...byService, last_delivery_at: '2026-11-27T08:00:00.000Z' }
    // Read, read again before the PATCH; then the next disable, seen twice; then the same again.
    const { fake, lines, watch } = watched([byService, byService, moved, moved], { reenable: true, healthy: () => true })
    await until(() => expect(fake.calls.enable).toBe(2))
    const reads = fake.calls.list!
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(reads + 5))
    expect(fake.calls.enable).toBe(2)
    expect(watch.view()).toMatchObject({ enabled: false, disabledBy: 'service', heldBack: true })
    expect(lines.filter((line) => line.includes('not enabled again: the service disabled it again'))).toHaveLength(1)
  })

  it('an enable by hand ends the hold', async () => {
    const { fake, watch } = watched([byService], { reenable: true, healthy: () => true })
    await until(() => expect(watch.view().heldBack).toBe(true))
    expect(fake.calls.enable).toBe(1)
    fake.script = [{ enabled: true, consecutive_failures: 0, last_error: 'HTTP 401' }, { ...byService, consecutive_failures: 21 }]
    await until(() => expect(fake.calls.enable).toBe(2))
  })

  it('last_error null, or an earlier one with no failure since it was seen enabled: an operator\'s, left alone (reenable off says so too)', async () => {
    const enabled = { enabled: true, consecutive_failures: 2, last_error: 'HTTP 500' }
    const { fake, lines, watch } = watched([enabled, { ...enabled, enabled: false }], { reenable: true, healthy: () => true })
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(6))
    expect(fake.calls.enable).toBeUndefined()
    expect(watch.view()).toMatchObject({ enabled: false, disabledBy: 'operator' })
    expect(lines.filter((line) => line.includes('HTTP 500, from an earlier disable): a deliberate disable, left as it is'))).toHaveLength(1)

    const off = watched([{ enabled: false, last_error: null }])
    await until(() => expect(off.fake.calls.list).toBeGreaterThanOrEqual(3))
    expect(off.lines.filter((line) => line.includes('last_error: none): a deliberate disable, left as it is.'))).toHaveLength(1)
  })
})

/** A MemoryStore that can be made to fail, as a Redis that is down does. */
class FlakyStore extends MemoryStore {
  down = true
  override claim(...args: Parameters<MemoryStore['claim']>) {
    if (this.down) throw Object.assign(new Error('connection refused'), { name: 'StoreDown' })
    return super.claim(...args)
  }
}

describe('the receiver\'s and the worker\'s watch option', () => {
  const disabled = { enabled: false, consecutive_failures: 20, last_error: 'HTTP 503' }

  it('receiver: not re-enabled while its store fails; re-enabled once it answers; the view in stats(); close() stops it', async () => {
    const fake = fakeService(disabled)
    const endpointId = [...fake.endpoints.keys()][0]!
    const store = new FlakyStore()
    const lines: string[] = []
    const receiver = createWebhookReceiver({
      secret: SECRET,
      store,
      on: { 'message.received': () => undefined },
      log: (line) => void lines.push(line),
      watch: endpointWatcher({ service: fake.service, endpointId, reenable: true, intervalMs: 5 }),
    })
    stops.push(() => receiver.close())
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(5))
    expect(fake.calls.enable).toBeUndefined()
    expect((await receiver.stats()).endpoint).toMatchObject({ endpointId, enabled: false, error: expect.stringMatching(/its store did not answer \(StoreDown\)/) })
    expect(lines.filter((line) => line.includes('not ready'))).toHaveLength(1)

    store.down = false
    await until(() => expect(fake.calls.enable).toBe(1))
    await until(async () => expect((await receiver.stats()).endpoint).toMatchObject({ enabled: true, reenabledAt: expect.any(Number) }))

    receiver.close()
    const reads = fake.calls.list
    await new Promise((resolve) => setTimeout(resolve, 40))
    expect(fake.calls.list).toBe(reads)
  })

  it('receiver with a secret source: not re-enabled while the source cannot be read; re-enabled once it can', async () => {
    const fake = fakeService(disabled)
    const source = new MemorySource({ secrets: [SECRET] })
    source.failReads = true
    const receiver = createWebhookReceiver({
      secret: source,
      on: { 'message.received': () => undefined },
      log: false,
      watch: endpointWatcher({ service: fake.service, endpointId: [...fake.endpoints.keys()][0]!, reenable: true, intervalMs: 5 }),
    })
    stops.push(() => receiver.close())
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(5))
    expect(fake.calls.enable).toBeUndefined()
    expect((await receiver.stats()).endpoint?.error).toMatch(/secret source could not be read \(SourceDown\)/)
    source.failReads = false
    await until(() => expect(fake.calls.enable).toBe(1))
  })

  it('receiver: the probe goes through verification, not the handlers', async () => {
    const fake = fakeService(disabled)
    let ran = 0
    const receiver = createWebhookReceiver({
      secret: SECRET,
      on: { 'message.received': () => void ran++ },
      log: false,
      watch: endpointWatcher({ service: fake.service, endpointId: [...fake.endpoints.keys()][0]!, reenable: true, intervalMs: 5 }),
    })
    stops.push(() => receiver.close())
    await until(() => expect(fake.calls.enable).toBe(1))
    expect(ran).toBe(0)
    expect((await receiver.stats()).answers).toEqual({})
  })

  it('readiness: a secret source with no secret, or a verification that refuses the probe, is not ready', async () => {
    const fake = fakeService(disabled)
    const endpointId = [...fake.endpoints.keys()][0]!
    const watcher = endpointWatcher({ service: fake.service, endpointId, reenable: true, intervalMs: 5 })
    const source = new MemorySource({ secrets: [], pendingUntil: Date.now() + 60_000 })
    const views: EndpointWatch[] = []
    const start = (parts: Parameters<typeof watcher.start>[0]) => {
      const watch = watcher.start(parts, undefined)
      stops.push(() => watch.stop())
      views.push(watch)
      return watch
    }
    const empty = start({ secret: source, verify: (input) => verifySignature(input, { secret: SECRET }) })
    const wrong = start({ secret: SECRET, verify: (input) => verifySignature(input, { secret: 'svc_whsec_another' }) })
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(8))
    expect(fake.calls.enable).toBeUndefined()
    expect(empty.view().error).toMatch(/holds no secret yet/)
    expect(wrong.view().error).toMatch(/refused a probe signed with its current secret \(invalid_signature\)/)
    for (const watch of views) watch.stop()

    source.state = { secrets: [SECRET] }
    start({ secret: source, verify: (input) => verifySignature(input, { secret: SECRET }) })
    await until(() => expect(fake.calls.enable).toBe(1))
  })

  it('worker: re-enabled once its inbox answers; the view as worker.endpoint; stop() ends the watch', async () => {
    const fake = fakeService(disabled)
    const inbox = new MemoryInbox()
    let down = true
    const stats = inbox.stats.bind(inbox)
    inbox.stats = async () => {
      if (down) throw Object.assign(new Error('inbox down'), { name: 'InboxDown' })
      return stats()
    }
    const worker = createInboxWorker({
      inbox,
      on: { 'message.received': () => undefined },
      log: false,
      pollIntervalMs: 5,
      watch: endpointWatcher({ service: fake.service, endpointId: [...fake.endpoints.keys()][0]!, reenable: true, intervalMs: 5 }),
    })
    expect(worker.endpoint).toBeUndefined()
    worker.start()
    stops.push(() => worker.stop(100))
    await until(() => expect(fake.calls.list).toBeGreaterThanOrEqual(4))
    expect(fake.calls.enable).toBeUndefined()
    expect(worker.endpoint?.error).toMatch(/its inbox did not answer/)
    down = false
    await until(() => expect(fake.calls.enable).toBe(1))
    await worker.stop(100)
    const reads = fake.calls.list
    await new Promise((resolve) => setTimeout(resolve, 40))
    expect(fake.calls.list).toBe(reads)
  })

  it('rejects a watch that is not an endpointWatcher, or one on a receiver of many endpoints', () => {
    const fake = fakeService({})
    const watch = endpointWatcher({ service: fake.service, endpointId: 'x' })
    expect(() => createWebhookReceiver({ secret: SECRET, on: {}, watch: { service: fake.service, endpointId: 'x' } as never })).toThrow(/endpointWatcher/)
    expect(() => createWebhookReceiver({ secret: () => SECRET, endpoint: () => 'a', on: {}, watch })).toThrow(/watchEndpoint per endpoint/)
    expect(() => createInboxWorker({ inbox: new MemoryInbox(), on: {}, watch: {} as never })).toThrow(/endpointWatcher/)
    expect(fake.calls.list).toBeUndefined()
  })

  it('no watch: no call to the service, and no endpoint in stats()', async () => {
    const receiver = createWebhookReceiver({ secret: SECRET, on: {}, log: false })
    expect(await receiver.stats()).not.toHaveProperty('endpoint')
    receiver.close()
  })
})
