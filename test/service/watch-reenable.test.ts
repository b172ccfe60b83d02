/**
 * What the watch's `reenable` may undo, against the service emulator over real HTTP and a real
 * receiver (`svc-webhooks/node` on 127.0.0.1) watching its own endpoint:
 * - an operator's disable (PATCH `enabled: false`) is never undone, also when an earlier
 *   disable's `last_error` is still set on the endpoint (the emulator keeps it, as the service may);
 * - a receiver holding a secret other than the service's passes its own readiness probe (signed
 *   with its own secret): it is re-enabled once, and once the service disables it again with no
 *   delivery delivered in between, it is left disabled, so each cycle no longer costs the sender's
 *   whole failure count again;
 * - an enable by hand ends that, and the watch watches again.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { createWebhookReceiver, type WebhookReceiver, type WebhookReceiverOptions } from 'svc-webhooks'
import { createServiceClient, endpointWatcher, watchEndpoint, type ServiceClient } from 'svc-webhooks/service'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'
import { until } from './fakes.js'

const DISABLE_AFTER = 3
const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Setup {
  emulator: ServiceEmulator
  service: ServiceClient
  server: Server
  url: string
  /** Replaced once the receiver exists: the server answers 503 until then. */
  handler: (req: IncomingMessage, res: ServerResponse) => void
}

async function setup(): Promise<Setup> {
  const emulator = await createServiceEmulator({ disableAfter: DISABLE_AFTER, retry: { firstDelayMs: 1, maxDelayMs: 2, maxAttempts: 5 }, timeoutMs: 2_000 })
  cleanups.push(() => emulator.close())
  const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
  const state: Setup = {
    emulator,
    service,
    server: undefined as unknown as Server,
    url: '',
    handler: (_req, res) => void res.writeHead(503).end(),
  }
  state.server = createServer((req, res) => state.handler(req, res))
  await new Promise<void>((done) => state.server.listen(0, '127.0.0.1', done))
  cleanups.push(() => new Promise((done) => state.server.close(done)))
  state.url = `http://127.0.0.1:${(state.server.address() as AddressInfo).port}/webhooks/svc`
  return state
}

/** A receiver served over node:http on the setup's server; closed (its watch stopped) after the test. */
function serve(s: Setup, options: WebhookReceiverOptions): WebhookReceiver {
  const receiver = createWebhookReceiver(options)
  cleanups.push(() => receiver.close())
  s.handler = (req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      void receiver.handle({ method: req.method, body: new Uint8Array(Buffer.concat(chunks)), headers: req.headers as Record<string, string> }).then((answer) => {
        res.writeHead(answer.status, answer.headers).end(answer.body)
      })
    })
  }
  return receiver
}

/** The emulator's API calls of one kind so far. */
const calls = (emulator: ServiceEmulator, method: string) => emulator.apiCalls().filter((c) => c.method === method).length

/** Sends `n` deliveries one after the other, each settled before the next. */
async function sendSettled(emulator: ServiceEmulator, endpointId: string, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    ids.push(emulator.send(endpointId))
    await emulator.settled()
  }
  return ids
}

describe('the watch re-enables only what the service disabled after failures', () => {
  it("an operator's disable is left alone, also with an earlier disable's last_error still on the endpoint", async () => {
    const s = await setup()
    const { emulator, service, url } = s
    const endpoint = await service.endpoints.create({ label: 'watched', url, subscribed_events: [] })
    let failing = true
    const lines: string[] = []
    const receiver = serve(s, {
      secret: endpoint.signing_secret,
      log: (line) => void lines.push(line),
      on: {
        'message.received': () => {
          if (failing) throw new Error('a dependency is down')
        },
      },
      watch: endpointWatcher({ service, endpointId: endpoint.id, reenable: true, intervalMs: 20 }),
    })

    // The handler fails: 500 three times in a row, and the service disables the endpoint.
    emulator.send(endpoint.id)
    await until(() => expect(emulator.endpoint(endpoint.id)).toMatchObject({ last_error: 'HTTP 500' }))
    failing = false
    // Disabled by the service after failures: the watch enables it again once the receiver is ready.
    await until(() => expect(emulator.endpoint(endpoint.id)?.enabled).toBe(true))
    const enablesBefore = calls(emulator, 'PATCH')
    expect(enablesBefore).toBe(1)

    // An operator disables it on purpose. The service keeps the earlier disable's last_error.
    await service.endpoints.disable(endpoint.id)
    expect(emulator.endpoint(endpoint.id)).toMatchObject({ enabled: false, last_error: 'HTTP 500', consecutive_failures: 0 })
    const reads = calls(emulator, 'GET')
    await until(() => expect(calls(emulator, 'GET')).toBeGreaterThanOrEqual(reads + 10))
    expect(emulator.endpoint(endpoint.id)?.enabled).toBe(false)
    expect(calls(emulator, 'PATCH')).toBe(enablesBefore + 1) // the operator's own PATCH, nothing after it
    expect((await receiver.stats()).endpoint).toMatchObject({ enabled: false, disabledBy: 'operator' })
    expect(lines.filter((line) => line.includes('a deliberate disable, left as it is'))).toHaveLength(1)
  })

  it("an endpoint disabled with last_error null (never by the service) is not enabled, whatever healthy() says", async () => {
    const { emulator, service, url } = await setup()
    const endpoint = await service.endpoints.create({ label: 'watched', url, subscribed_events: [] })
    await service.endpoints.disable(endpoint.id)
    const lines: string[] = []
    const watch = watchEndpoint({ service, endpointId: endpoint.id, reenable: true, healthy: () => true, intervalMs: 10, log: (line) => void lines.push(line) })
    cleanups.push(() => watch.stop())
    await until(() => expect(calls(emulator, 'GET')).toBeGreaterThanOrEqual(10))
    expect(emulator.endpoint(endpoint.id)).toMatchObject({ enabled: false, last_error: null })
    expect(calls(emulator, 'PATCH')).toBe(1)
    expect(watch.view()).toMatchObject({ enabled: false, disabledBy: 'operator' })
    expect(lines.join('\n')).toMatch(/last_error: none\): a deliberate disable, left as it is/)
  })
})

describe('a re-enable that held is not counted against the next one', () => {
  it('disabled, re-enabled, deliveries delivered, disabled again by a new outage: re-enabled again', async () => {
    const s = await setup()
    const { emulator, service, url } = s
    const endpoint = await service.endpoints.create({ label: 'watched', url, subscribed_events: [] })
    let failing = true
    const receiver = serve(s, {
      secret: endpoint.signing_secret,
      log: false,
      on: {
        'message.received': () => {
          if (failing) throw new Error('a dependency is down')
        },
      },
      watch: endpointWatcher({ service, endpointId: endpoint.id, reenable: true, intervalMs: 20 }),
    })
    emulator.send(endpoint.id)
    await until(() => expect(emulator.endpoint(endpoint.id)?.last_error).toBe('HTTP 500'))
    failing = false
    await until(() => expect(emulator.endpoint(endpoint.id)?.enabled).toBe(true))
    // Delivered after the re-enable, and seen so by the watch.
    await sendSettled(emulator, endpoint.id, 2)
    const reads = calls(emulator, 'GET')
    await until(() => expect(calls(emulator, 'GET')).toBeGreaterThanOrEqual(reads + 2))

    // A new outage: the service disables it again (its readiness does not run handlers, so the
    // watch enables it again at once; what matters is that it does).
    failing = true
    emulator.send(endpoint.id)
    await until(() => expect(calls(emulator, 'PATCH')).toBe(2))
    failing = false
    await until(() => expect(emulator.endpoint(endpoint.id)?.enabled).toBe(true))
    expect((await receiver.stats()).endpoint).not.toHaveProperty('heldBack')
  })
})

describe('readiness: a receiver holding a secret other than the service\'s', () => {
  it('is re-enabled once; disabled again with nothing delivered, it is left disabled until enabled by hand', async () => {
    const s = await setup()
    const { emulator, service, url } = s
    const endpoint = await service.endpoints.create({ label: 'watched', url, subscribed_events: [] })
    const lines: string[] = []
    // A stale deploy: a secret the service no longer signs with. Its probe, signed with that same
    // secret, passes its own verification.
    const receiver = serve(s, {
      secret: 'svc_whsec_a_secret_the_service_no_longer_uses',
      log: (line) => void lines.push(line),
      on: { 'message.received': () => undefined },
      watch: endpointWatcher({ service, endpointId: endpoint.id, reenable: true, intervalMs: 20 }),
    })

    const first = await sendSettled(emulator, endpoint.id, DISABLE_AFTER)
    expect(emulator.endpoint(endpoint.id)).toMatchObject({ enabled: false, last_error: 'HTTP 401' })
    // The service's disable: re-enabled once the receiver is ready, which it is by its own checks.
    await until(() => expect(emulator.endpoint(endpoint.id)?.enabled).toBe(true))
    expect(calls(emulator, 'PATCH')).toBe(1)

    // Every delivery still fails: the service disables it again, and nothing got through.
    const second = await sendSettled(emulator, endpoint.id, DISABLE_AFTER)
    expect(emulator.endpoint(endpoint.id)?.enabled).toBe(false)
    const reads = calls(emulator, 'GET')
    await until(() => expect(calls(emulator, 'GET')).toBeGreaterThanOrEqual(reads + 15))
    // Today's count: one re-enable for two disables; 2 × DISABLE_AFTER refusals, not one more cycle per interval.
    expect(calls(emulator, 'PATCH')).toBe(1)
    expect(emulator.endpoint(endpoint.id)?.enabled).toBe(false)
    const refused = emulator.deliveries().filter((d) => d.state === 'dropped').map((d) => d.id)
    expect(refused.sort()).toEqual([...first, ...second].sort())
    expect((await receiver.stats()).endpoint).toMatchObject({ enabled: false, disabledBy: 'service', heldBack: true, error: expect.stringMatching(/^not re-enabled: /) })
    expect(lines.filter((line) => line.includes('not enabled again: the service disabled it again'))).toHaveLength(1)

    // Enabled by hand (the cause fixed, or so the operator says): the watch watches again.
    await service.endpoints.enable(endpoint.id)
    await until(async () => expect((await receiver.stats()).endpoint).toMatchObject({ enabled: true }))
    expect((await receiver.stats()).endpoint).not.toHaveProperty('heldBack')
  })
})
