/**
 * createServiceClient over real HTTP against the service emulator: every §7 answer as one
 * ServiceApiError, retries on 503/429 that honour Retry-After, no retry on another 4xx (calls
 * counted by the emulator), the per-call timeout, the rules for calls that must not be repeated
 * blindly, the token absent from every error, and an endpoint's whole life.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createServiceClient, isServiceApiError, ServiceApiError, type ServiceClientOptions } from 'svc-webhooks/service'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'

const TOKEN = 'svc_pat_client_tests_do_not_log_this_token'
let emulator: ServiceEmulator
let plain: ServiceEmulator
const waits: number[] = []

function client(options: Partial<ServiceClientOptions> = {}, on: ServiceEmulator = emulator) {
  return createServiceClient({
    baseUrl: on.baseUrl,
    token: on.token,
    businessId: on.businessId,
    sleep: async (ms) => void waits.push(ms),
    ...options,
  })
}

async function caught(promise: Promise<unknown>): Promise<ServiceApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(isServiceApiError(error), String(error)).toBe(true)
  return error as ServiceApiError
}

/** The token must not appear in any form an error may be printed or logged in. */
function expectNoToken(error: unknown): void {
  const cause = (error as Error).cause as Error | undefined
  const forms = [String(error), (error as Error).stack ?? '', JSON.stringify(error), String(cause), cause?.stack ?? '', JSON.stringify(cause ?? null), JSON.stringify(Object.entries(error as object))]
  for (const form of forms) expect(form).not.toContain(TOKEN)
}

const endpointCalls = () => emulator.apiCalls().filter((c) => c.path.startsWith('/api/v1/webhook-endpoints'))

beforeAll(async () => {
  emulator = await createServiceEmulator({ token: TOKEN })
  plain = await createServiceEmulator({ eventWebhooks: false })
})
afterAll(async () => {
  await emulator.close()
  await plain.close()
})
afterEach(() => {
  waits.length = 0
})

describe('the token over http://', () => {
  it('is refused at creation for any host but a loopback one', () => {
    const make = (baseUrl: string) => () => createServiceClient({ baseUrl, token: TOKEN, businessId: crypto.randomUUID() })
    for (const url of ['http://api.example.com', 'http://10.0.0.5:8080', 'http://192.168.1.1', 'http://[fe80::1]', 'http://128.0.0.1', 'http://localhost.example.com']) {
      expect(make(url), url).toThrow(/http:\/\/ .*unencrypted/)
    }
    for (const url of ['http://127.0.0.1:1', 'http://127.8.9.10', 'http://localhost:3000', 'http://api.localhost', 'http://[::1]:9', 'https://api.example.com']) {
      expect(make(url), url).not.toThrow()
    }
  })

  it('the error never shows the token', () => {
    const error = (() => {
      try {
        createServiceClient({ baseUrl: 'http://api.example.com', token: TOKEN, businessId: crypto.randomUUID() })
      } catch (e) {
        return e
      }
    })()
    expect(String(error)).not.toContain(TOKEN)
  })
})

describe('options are checked at creation', () => {
  it.each([
    [{ baseUrl: undefined }, /baseUrl` is required/],
    [{ baseUrl: 'api.example.com' }, /not a URL/],
    [{ baseUrl: 'ftp://api.example.com' }, /https:\/\//],
    [{ token: '' }, /`token` must be a non-empty string/],
    [{ token: `${TOKEN}\n` }, /whitespace/],
    [{ businessId: '' }, /businessId/],
    [{ retries: -1 }, /retries/],
    [{ timeoutMs: 0 }, /timeoutMs/],
  ])('%o', (override, message) => {
    let error: unknown
    try {
      createServiceClient({ baseUrl: 'https://api.example.com', token: TOKEN, businessId: 'b', ...override } as ServiceClientOptions)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TypeError)
    expect(String(error)).toMatch(message)
    expect(String(error)).not.toContain(TOKEN)
  })

  it('adds /api/v1 once, with or without a trailing slash or /api/v1 already there', async () => {
    for (const baseUrl of [emulator.baseUrl, `${emulator.baseUrl}/`, `${emulator.baseUrl}/api/v1`, `${emulator.baseUrl}/api/v1/`]) {
      expect(await client({ baseUrl }).endpoints.list()).toBeInstanceOf(Array)
    }
    expect(endpointCalls().slice(-4).map((c) => c.path)).toEqual(Array(4).fill('/api/v1/webhook-endpoints'))
  })
})

describe('§7 errors, as one ServiceApiError', () => {
  it('401 {detail}: code unauthorized, the detail kept, the token not shown', async () => {
    const error = await caught(client({ token: 'svc_pat_wrong' }).endpoints.list())
    expect(error).toBeInstanceOf(ServiceApiError)
    expect([error.status, error.code, error.detail, error.retryable]).toEqual([401, 'unauthorized', 'Not authenticated', false])
    expect(error.message).toContain('SVC_API_TOKEN')
  })

  it('403 plan_limit_event_webhooks', async () => {
    const error = await caught(client({}, plain).endpoints.create({ label: 'x', url: 'https://example.com/hook', subscribed_events: [] }))
    expect([error.status, error.code, error.retryable]).toEqual([403, 'plan_limit_event_webhooks', false])
  })

  it('404 ApiError for an unknown endpoint, and for another business', async () => {
    const unknown = await caught(client().endpoints.update(crypto.randomUUID(), { label: 'x' }))
    expect([unknown.status, unknown.code]).toEqual([404, 'not_found'])
    const business = await caught(client({ businessId: crypto.randomUUID() }).endpoints.list())
    expect([business.status, business.code]).toEqual([404, 'business_not_found'])
  })

  it('422: the list kept as is, the detail a readable join', async () => {
    const error = await caught(client().endpoints.create({ label: 'x', url: 'ftp://example.com', subscribed_events: ['message.received', 'message.recieved'] }))
    expect([error.status, error.code]).toEqual([422, 'validation_error'])
    expect(error.errors?.map((e) => e.loc)).toEqual([
      ['body', 'url'],
      ['body', 'subscribed_events', 1],
    ])
    expect(error.detail).toMatch(/^body\.url: .+; body\.subscribed_events\.1: Unknown event type/)
  })

  it('a body that is not JSON still gives a ServiceApiError with the status', async () => {
    const server = await listen((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad gateway</html>'))
    try {
      const error = await caught(client({ baseUrl: server.url, token: TOKEN, retries: 0 }).endpoints.list())
      expect([error.status, error.code, error.retryable]).toEqual([502, 'server_error', true])
      expect(error.detail).toContain('not JSON')
    } finally {
      server.close()
    }
  })
})

describe('retries', () => {
  it('503 with Retry-After: waited as asked, then the call passes', async () => {
    const before = endpointCalls().length
    emulator.failNextApiCalls(2, 503, 1)
    expect(await client().endpoints.list()).toBeInstanceOf(Array)
    expect(waits).toEqual([1000, 1000])
    expect(endpointCalls().slice(before).map((c) => c.status)).toEqual([503, 503, 200])
  })

  it('429 with Retry-After: retried even for a create (the service did not act)', async () => {
    emulator.failNextApiCalls(1, 429, 2)
    const created = await client().endpoints.create({ label: 'after 429', url: 'https://example.com/hook', subscribed_events: [] })
    expect(created.signing_secret).toMatch(/^svc_whsec_/)
    expect(waits).toEqual([2000])
  })

  it('503 with Retry-After to a create: not repeated, since a gateway may answer it after the endpoint was made', async () => {
    const before = (await client().endpoints.list()).length
    // The service made the endpoint; the gateway in front answered 503 with Retry-After.
    emulator.faultApiCalls(1, { method: 'POST', path: '/api/v1/webhook-endpoints', status: 503, retryAfterSeconds: 1, acted: true })
    const error = await caught(client().endpoints.create({ label: 'gateway 503', url: 'https://example.com/gateway', subscribed_events: [] }))
    expect([error.status, error.code, error.retryable]).toEqual([503, 'service_unavailable', true])
    expect(waits).toEqual([])
    // One endpoint, not two: the caller lists (registerEndpoint does) instead of creating again.
    expect((await client().endpoints.list()).length).toBe(before + 1)
  })

  it('rotateSecret after a 503 with Retry-After is repeated, and a refusal then is outcome_unknown, not a plain 4xx', async () => {
    const { id } = await client().endpoints.create({ label: 'rotate after 503', url: 'https://example.com/rotate-503', subscribed_events: [] })
    emulator.faultApiCalls(1, { path: /rotate-secret$/, status: 503, retryAfterSeconds: 1, acted: true })
    emulator.faultApiCalls(1, { path: /rotate-secret$/, status: 401 })
    const error = await caught(client().endpoints.rotateSecret(id))
    expect([error.status, error.code, error.retryable]).toEqual([401, 'outcome_unknown', true])
    expect(waits).toEqual([1000])
  })

  it('a per-call timeoutMs bounds each attempt of a slow rotate-secret', async () => {
    const { id } = await client().endpoints.create({ label: 'slow rotate', url: 'https://example.com/slow-rotate', subscribed_events: [] })
    emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 2_000 })
    const started = Date.now()
    const error = await caught(client().endpoints.rotateSecret(id, { timeoutMs: 200 }))
    expect(error.code).toBe('outcome_unknown')
    expect(Date.now() - started).toBeLessThan(1_500)
  })

  it('5xx without Retry-After: bounded exponential backoff with jitter, then the error with its attempts', async () => {
    const before = endpointCalls().length
    emulator.failNextApiCalls(10, 500)
    const error = await caught(client({ retries: 3, retryBaseMs: 100, retryMaxMs: 250 }).endpoints.list())
    expect([error.status, error.retryable]).toEqual([500, true])
    expect(error.message).toContain('after 4 attempts')
    expect(endpointCalls().length - before).toBe(4)
    expect(waits).toHaveLength(3)
    expect(waits[0]).toBeGreaterThanOrEqual(50)
    expect(waits[0]).toBeLessThanOrEqual(100)
    for (const wait of waits.slice(1)) expect(wait).toBeLessThanOrEqual(250)
    emulator.failNextApiCalls(0)
  })

  it('a Retry-After longer than retryMaxMs is not waited for: the error says how long', async () => {
    emulator.failNextApiCalls(1, 503, 120)
    const error = await caught(client().endpoints.list())
    expect([error.status, error.retryAfterMs, error.retryable]).toEqual([503, 120_000, true])
    expect(waits).toEqual([])
  })

  it('a Retry-After given as an HTTP date', async () => {
    const server = await listen((_req, res, n) => {
      if (n === 1) res.writeHead(503, { 'retry-after': new Date(Date.parse('2030-01-01T00:00:03Z')).toUTCString() }).end()
      else res.writeHead(200, { 'content-type': 'application/json' }).end('[]')
    })
    try {
      await client({ baseUrl: server.url, token: TOKEN, now: () => Date.parse('2030-01-01T00:00:00Z') }).endpoints.list()
      expect(waits).toEqual([3000])
    } finally {
      server.close()
    }
  })

  it.each([400, 401, 403, 404, 409, 422])('never retries a %i', async (status) => {
    const before = endpointCalls().length
    emulator.failNextApiCalls(1, status)
    const error = await caught(client().endpoints.list())
    expect(error.status).toBe(status)
    expect(error.retryable).toBe(false)
    expect(endpointCalls().length - before).toBe(1)
    expect(waits).toEqual([])
  })

  it('a refused connection is retried for every call, then network_error', async () => {
    const port = await closedPort()
    const error = await caught(client({ baseUrl: `http://127.0.0.1:${port}`, token: TOKEN, retries: 2 }).endpoints.rotateSecret(crypto.randomUUID()))
    expect([error.status, error.code, error.retryable]).toEqual([0, 'network_error', true])
    expect(waits).toHaveLength(2)
    expectNoToken(error)
  })
})

describe('timeouts and lost answers', () => {
  let slow: Awaited<ReturnType<typeof listen>>
  beforeAll(async () => {
    slow = await listen(() => undefined) // never answers
  })
  afterAll(() => slow.close())

  it('a call that outlasts timeoutMs is retried (list), then fails with code timeout', async () => {
    const error = await caught(client({ baseUrl: slow.url, token: TOKEN, timeoutMs: 50, retries: 1 }).endpoints.list())
    expect([error.code, error.status, error.retryable]).toEqual(['timeout', 0, true])
    expect(slow.count()).toBeGreaterThanOrEqual(2)
    expectNoToken(error)
  })

  it('rotateSecret whose answer is lost is not repeated: outcome_unknown, retryable', async () => {
    const before = slow.count()
    const error = await caught(client({ baseUrl: slow.url, token: TOKEN, timeoutMs: 50, retries: 3 }).endpoints.rotateSecret(crypto.randomUUID()))
    expect([error.code, error.retryable]).toEqual(['outcome_unknown', true])
    expect(error.message).toContain('rotate again')
    expect(slow.count() - before).toBe(1)
    expect(waits).toEqual([])
    expectNoToken(error)
  })

  it('a 500 to a create is not repeated (the endpoint may exist)', async () => {
    const before = endpointCalls().length
    emulator.failNextApiCalls(1, 500)
    const error = await caught(client().endpoints.create({ label: 'x', url: 'https://example.com/hook', subscribed_events: [] }))
    expect([error.status, error.retryable]).toEqual([500, true])
    expect(endpointCalls().length - before).toBe(1)
  })
})

describe('the token never appears', () => {
  it('in any error, whichever way the call fails, nor in onAttempt', async () => {
    const seen: string[] = []
    const onAttempt = (a: unknown) => void seen.push(JSON.stringify(a))
    const port = await closedPort()
    const echo = await listen((req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: `bad ${req.headers.authorization}`, code: 'echo' })))
    try {
      const failing = [
        () => client({ onAttempt }).endpoints.update(crypto.randomUUID(), { label: 'x' }),
        () => client({ onAttempt, businessId: 'nope' }).endpoints.list(),
        () => client({ onAttempt }).endpoints.create({ label: 'x', url: 'nope', subscribed_events: [] }),
        () => client({ baseUrl: `http://127.0.0.1:${port}`, token: TOKEN, retries: 0, onAttempt }).endpoints.list(),
        () => client({ baseUrl: echo.url, token: TOKEN, onAttempt }).endpoints.list(),
        () => client({ fetch: async () => Promise.reject(new Error(`custom fetch failed with Bearer ${TOKEN}`)), retries: 0 }).endpoints.list(),
      ]
      for (const call of failing) expectNoToken(await caught(call()))
      expect(seen.length).toBeGreaterThan(3)
      for (const line of seen) expect(line).not.toContain(TOKEN)
    } finally {
      echo.close()
    }
  })
})

describe('an endpoint, created to removed', () => {
  it('create → list → update → rotate → disable → enable → remove', async () => {
    const service = client()
    const created = await service.endpoints.create({ label: 'shop', url: 'https://example.com/webhooks/svc', subscribed_events: ['message.received'] })
    expect(created).toMatchObject({ label: 'shop', enabled: true, consecutive_failures: 0, last_error: null, subscribed_events: ['message.received'] })
    expect(created.signing_secret).toBe(emulator.secretOf(created.id))

    const newest = await service.endpoints.create({ label: 'newer', url: 'https://example.com/other', subscribed_events: [] })
    const listed = await service.endpoints.list()
    expect(listed.map((e) => e.id).indexOf(newest.id)).toBeLessThan(listed.map((e) => e.id).indexOf(created.id))
    for (const endpoint of listed) expect(endpoint).not.toHaveProperty('signing_secret')

    const updated = await service.endpoints.update(created.id, { label: 'shop (eu)', subscribed_events: [] })
    expect(updated).toMatchObject({ id: created.id, label: 'shop (eu)', url: 'https://example.com/webhooks/svc', subscribed_events: [] })
    expect(updated).not.toHaveProperty('signing_secret')

    const rotated = await service.endpoints.rotateSecret(created.id)
    expect(rotated.signing_secret).not.toBe(created.signing_secret)
    expect(emulator.secretOf(created.id)).toBe(rotated.signing_secret)

    expect((await service.endpoints.disable(created.id)).enabled).toBe(false)
    expect((await service.endpoints.enable(created.id)).enabled).toBe(true)

    await service.endpoints.remove(created.id)
    expect(emulator.endpoint(created.id)).toBeUndefined()
    expect((await service.endpoints.list()).map((e) => e.id)).not.toContain(created.id)
    expect((await caught(service.endpoints.remove(created.id))).status).toBe(404)
    await service.endpoints.remove(newest.id)
  })

  it('resend answers 202 with string values; an unknown delivery is 404', async () => {
    const service = client()
    const endpoint = await service.endpoints.create({ label: 'resend', url: `http://127.0.0.1:${await closedPort()}/`, subscribed_events: [] })
    await service.endpoints.disable(endpoint.id)
    const id = emulator.send(endpoint.id)
    const answer = await service.deliveries.resend(id)
    expect(Object.values(answer).every((v) => typeof v === 'string')).toBe(true)
    expect((await caught(service.deliveries.resend(crypto.randomUUID()))).code).toBe('not_found')
    await service.endpoints.remove(endpoint.id)
  })
})

// ---------------------------------------------------------------------------------------------

/** A bare HTTP server on 127.0.0.1 for answers the emulator does not give; `n` counts requests from 1. */
async function listen(handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, n: number) => void) {
  let n = 0
  const server: Server = createServer((req, res) => handler(req, res, ++n))
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    count: () => n,
    close: () => {
      server.closeAllConnections()
      server.close()
    },
  }
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as AddressInfo
  await new Promise((done) => server.close(done))
  return port
}
