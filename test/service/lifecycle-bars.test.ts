/**
 * The endpoint lifecycle's bars, end to end: the service emulator of svc-webhooks/testing (a
 * sender that follows spec §6.1-6.3) delivering to real receiver processes
 * (test/support/lifecycle/receiver.mjs: node:http, RedisStore and the secret on one real
 * redis-server), through the service's API with createServiceClient.
 *
 * a. Rotation under load: three receivers behind one URL (a round-robin forwarder in this
 *    process, as a load balancer spreads them), 20 deliveries/s, the secret rotated mid-run.
 *    With RedisSecretSource + rotateEndpointSecret: no permanent 4xx to a genuine delivery, none
 *    lost, none run twice, never disabled. Beside it, the baseline: the secret in the
 *    environment, rotated, then a rolling restart with [new, old]; both counts are printed.
 * b. A receiver down until the service disables the endpoint, back with `watch` (reenable): the
 *    endpoint is enabled again, and every delivery held meanwhile, resent, runs once.
 * c. Deliveries refused by a wrong secret, then `svc-webhooks endpoints resend --from-log`: each
 *    runs once.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process'
import type { Readable } from 'node:stream'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, request as httpRequest, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { createServiceClient, registerEndpoint, rotateEndpointSecret } from 'svc-webhooks/service'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const ROOT = resolve(import.meta.dirname, '../..')
const RECEIVER = join(ROOT, 'test/support/lifecycle/receiver.mjs')
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** Polls `check` every 20 ms until it returns true, at most `timeoutMs`. */
async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

type Child = ChildProcessByStdio<null, Readable, Readable>

interface Receiver {
  child: Child
  port: number
  stop(): Promise<void>
}

const children = new Set<Child>()

async function startReceiver(env: Record<string, string>): Promise<Receiver> {
  const child = spawn(process.execPath, [RECEIVER], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  let output = ''
  child.stderr.on('data', (chunk: Buffer) => (output += chunk))
  const port = await new Promise<number>((done, fail) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk
      const match = /READY (\d+)/.exec(output)
      if (match) done(Number(match[1]))
    })
    child.once('exit', (code: number | null) => fail(new Error(`receiver exited ${code}: ${output}`)))
  })
  return {
    child,
    port,
    stop: () =>
      new Promise((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once('exit', () => done())
        child.kill('SIGKILL')
      }),
  }
}

/**
 * A round-robin forwarder: one URL for the sender, each request to the next backend; a backend
 * that refuses the connection (a process restarting) is skipped for the next, as a load
 * balancer does. With none reachable: 502, which the sender retries.
 */
async function startForwarder(): Promise<{ url: string; backends: number[]; close(): Promise<void> }> {
  const backends: number[] = []
  let next = 0
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const attempt = (left: number): void => {
        const port = backends[next++ % backends.length]!
        const out = httpRequest({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers, agent: false }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        })
        out.on('error', () => (left > 1 ? attempt(left - 1) : res.writeHead(502).end()))
        out.end(body)
      }
      attempt(backends.length)
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}/webhooks/svc`, backends, close: () => new Promise((done) => server.close(() => done())) }
}

describeWithRedis('endpoint lifecycle bars', () => {
  let redis: RedisServer
  let admin: Redis
  const work = mkdtempSync(join(tmpdir(), 'svc-webhooks-lifecycle-'))
  beforeAll(async () => {
    redis = await startRedisServer()
    admin = new Redis(redis.url)
  })
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    admin?.disconnect()
    await redis?.stop()
    rmSync(work, { recursive: true, force: true })
  })

  /** Runs of each delivery, from the receivers' record. */
  async function runs(): Promise<Map<string, number>> {
    return new Map(Object.entries(await admin.hgetall('runs')).map(([id, n]) => [id, Number(n)]))
  }

  /**
   * 20 deliveries/s for `seconds` through one endpoint, `midway` called halfway; then waits until
   * the sender settled. Returns the figures of the run.
   */
  async function underLoad(emulator: ServiceEmulator, endpointId: string, seconds: number, midway: () => Promise<void>) {
    await admin.del('runs')
    const sent: string[] = []
    const total = seconds * 20
    let during: Promise<void> | undefined
    const started = Date.now()
    for (let i = 0; i < total; i++) {
      const due = started + i * 50
      if (Date.now() < due) await sleep(due - Date.now())
      sent.push(await emulator.send(endpointId))
      if (i === total / 2) during = midway()
    }
    await during
    await emulator.settled()
    const ran = await runs()
    const deliveries = emulator.deliveries().filter((d) => sent.includes(d.id))
    const permanent = deliveries.filter((d) =>
      d.attempts.some((a) => a.status !== undefined && a.status >= 400 && a.status < 500 && a.status !== 429),
    ).length
    const retried = deliveries.filter((d) => d.attempts.some((a) => a.status === undefined || a.status >= 500 || a.status === 429)).length
    return {
      sent: sent.length,
      permanent,
      retried,
      lost: sent.filter((id) => !ran.has(id)).length,
      twice: sent.filter((id) => (ran.get(id) ?? 0) > 1).length,
      enabled: emulator.endpoint(endpointId)?.enabled,
    }
  }

  it('a: rotated under 20 deliveries/s across three processes: no permanent 4xx, none lost, none twice, never disabled (the baseline beside it)', async () => {
    const emulator = await createServiceEmulator({ retry: { firstDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 50 }, timeoutMs: 5_000 })
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
    const forwarder = await startForwarder()
    try {
      // With a secret source: registered and rotated through it, no restart.
      const source = new RedisSecretSource({ client: admin, key: 'bars:a:secret' })
      const endpoint = await registerEndpoint({ service, url: forwarder.url, source, log: false })
      const receivers = await Promise.all([0, 1, 2].map(() => startReceiver({ LC_REDIS_URL: redis.url, LC_SECRET_KEY: 'bars:a:secret' })))
      forwarder.backends.push(...receivers.map((r) => r.port))
      const withSource = await underLoad(emulator, endpoint.id, 6, async () => {
        const rotation = await rotateEndpointSecret({ service, endpointId: endpoint.id, source, graceMs: 1_000, log: false })
        await rotation.finished
      })
      await Promise.all(receivers.map((r) => r.stop()))
      forwarder.backends.length = 0
      // The rotation ran to its end: the source holds the service's current secret alone.
      expect((await source.read()).secrets).toEqual([emulator.secretOf(endpoint.id)])

      // The baseline: the secret in the environment, rotated, then a rolling restart with [new, old].
      const base = await service.endpoints.create({ label: 'baseline', url: forwarder.url, subscribed_events: [] })
      let secrets = [base.signing_secret]
      const env = () => ({ LC_REDIS_URL: redis.url, LC_SECRET: secrets.join(',') })
      const rolling = await Promise.all([0, 1, 2].map(() => startReceiver(env())))
      forwarder.backends.push(...rolling.map((r) => r.port))
      const baseline = await underLoad(emulator, base.id, 6, async () => {
        const rotated = await service.endpoints.rotateSecret(base.id)
        secrets = [rotated.signing_secret, ...secrets]
        for (let i = 0; i < rolling.length; i++) {
          await rolling[i]!.stop()
          rolling[i] = await startReceiver(env())
          forwarder.backends[i] = rolling[i]!.port
          await sleep(300)
        }
      })
      await Promise.all(rolling.map((r) => r.stop()))

      console.log(`lifecycle bar a (${withSource.sent} deliveries each): RedisSecretSource + rotateEndpointSecret ${JSON.stringify(withSource)}; environment secret + rolling restart ${JSON.stringify(baseline)}`)
      expect(withSource).toMatchObject({ sent: 120, permanent: 0, lost: 0, twice: 0, enabled: true })
      expect(baseline.sent).toBe(120)
      expect(baseline.twice).toBe(0)
    } finally {
      await forwarder.close()
      await emulator.close()
    }
  })

  /** A bar-a run on a RedisSecretSource with `midway` as the rotation, sender's 10 s timeout; returns its figures. */
  async function rotatedUnderLoad(name: string, seconds: number, midway: (rotate: () => Promise<void>, emulator: ServiceEmulator) => Promise<void>) {
    const emulator = await createServiceEmulator({ retry: { firstDelayMs: 100, maxDelayMs: 1_000, maxAttempts: 50 }, timeoutMs: 10_000 })
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
    const forwarder = await startForwarder()
    const key = `bars:${name}:secret`
    try {
      const source = new RedisSecretSource({ client: admin, key })
      const endpoint = await registerEndpoint({ service, url: forwarder.url, source, log: false })
      const receivers = await Promise.all([0, 1, 2].map(() => startReceiver({ LC_REDIS_URL: redis.url, LC_SECRET_KEY: key })))
      forwarder.backends.push(...receivers.map((r) => r.port))
      let mostFailures = 0
      const watching = setInterval(() => (mostFailures = Math.max(mostFailures, emulator.endpoint(endpoint.id)?.consecutive_failures ?? 0)), 20)
      const rotate = async () => {
        const rotation = await rotateEndpointSecret({ service, endpointId: endpoint.id, source, graceMs: 1_000, log: false })
        await rotation.finished
      }
      const figures = await underLoad(emulator, endpoint.id, seconds, () => midway(rotate, emulator))
      clearInterval(watching)
      await Promise.all(receivers.map((r) => r.stop()))
      const state = await source.read()
      expect(state.secrets).toContain(emulator.secretOf(endpoint.id))
      expect(state.pending ?? []).toEqual([])
      return { ...figures, mostFailures }
    } finally {
      await forwarder.close()
      await emulator.close()
    }
  }

  it('a2: two rotations 200 ms apart, and a rotation whose answer takes 3 s: no permanent 4xx, none lost, none twice, never disabled', async () => {
    const twice = await rotatedUnderLoad('a2', 10, async (rotate, emulator) => {
      // The first rotation acts first and is answered 500 ms late: the second's answer comes back before it.
      emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 500 })
      const first = rotate()
      await sleep(200)
      await Promise.all([first, rotate()])
    })
    const slow = await rotatedUnderLoad('a3', 10, async (rotate, emulator) => {
      // rotate-secret acts at once (the service signs with the new secret) and answers 3 s later.
      emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 3_000 })
      await rotate()
    })
    console.log(`lifecycle bar a2 (${twice.sent} deliveries each, three receivers, RedisSecretSource): two rotations 200 ms apart, the first answered last ${JSON.stringify(twice)}; rotate answer 3 s late ${JSON.stringify(slow)}`)
    for (const figures of [twice, slow]) {
      expect(figures).toMatchObject({ sent: 200, permanent: 0, lost: 0, twice: 0, enabled: true })
      expect(figures.mostFailures).toBeLessThan(20)
    }
  })

  it('b: disabled while its receiver was down, enabled again by the watch; every held delivery resent runs once', async () => {
    const emulator = await createServiceEmulator({ retry: { firstDelayMs: 20, maxDelayMs: 50, maxAttempts: 3 }, disableAfter: 5, timeoutMs: 2_000 })
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
    await admin.del('runs')
    const port = await freePort()
    const source = new RedisSecretSource({ client: admin, key: 'bars:b:secret' })
    const endpoint = await registerEndpoint({ service, url: `http://127.0.0.1:${port}/webhooks/svc`, source, log: false })
    const env = { LC_REDIS_URL: redis.url, LC_SECRET_KEY: 'bars:b:secret', LC_PORT: String(port) }
    try {
      let receiver = await startReceiver(env)
      const before = [await emulator.send(endpoint.id), await emulator.send(endpoint.id)]
      await emulator.settled()
      await receiver.stop()
      const whileDown: string[] = []
      for (let i = 0; i < 20 && emulator.endpoint(endpoint.id)?.enabled; i++) {
        whileDown.push(await emulator.send(endpoint.id))
        await emulator.settled()
      }
      expect(emulator.endpoint(endpoint.id)?.enabled).toBe(false)
      for (let i = 0; i < 5; i++) whileDown.push(await emulator.send(endpoint.id))
      await emulator.settled()

      const back = Date.now()
      receiver = await startReceiver({
        ...env,
        LC_WATCH: JSON.stringify({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId, endpointId: endpoint.id, intervalMs: 500 }),
      })
      await until(() => emulator.endpoint(endpoint.id)?.enabled === true, 'the watch to enable the endpoint again')
      const enabledAfterMs = Date.now() - back

      // The ids the service's dashboard shows: the deliveries that never got a 2xx.
      const undelivered = emulator.deliveries().filter((d) => d.endpointId === endpoint.id && d.state !== 'delivered').map((d) => d.id)
      expect(undelivered.length).toBeGreaterThan(5)
      for (const id of undelivered) await service.deliveries.resend(id)
      await emulator.settled()
      const ran = await runs()
      console.log(`lifecycle bar b: enabled again ${enabledAfterMs} ms after the receiver started (watch intervalMs 500); ${undelivered.length} undelivered resent`)
      for (const id of [...before, ...whileDown]) expect(ran.get(id), `delivery ${id}`).toBe(1)
      await receiver.stop()
    } finally {
      await emulator.close()
    }
  })

  it('c: refused for a while by a wrong secret, then `svc-webhooks endpoints resend --from-log`: every one runs once', async () => {
    // The service's own limit: 20 refusals in a row disable the endpoint (1 s at 20/s), and what
    // is sent after that is held. The recovery takes both: the ids in the log, and the held ones.
    const emulator = await createServiceEmulator({ retry: { firstDelayMs: 20, maxDelayMs: 50, maxAttempts: 3 }, timeoutMs: 2_000 })
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
    const env = { PATH: process.env.PATH ?? '', SVC_API_URL: emulator.baseUrl, SVC_API_TOKEN: emulator.token, SVC_BUSINESS_ID: emulator.businessId, NODE_ENV: 'production' as const }
    async function cli(...args: string[]): Promise<string> {
      const child = spawn(process.execPath, [join(ROOT, 'dist/cli.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk))
      child.stderr.on('data', (chunk: Buffer) => (output += chunk))
      const code = await new Promise((done) => child.once('exit', done))
      expect(code, output).toBe(0)
      return output
    }
    await admin.del('runs')
    const logFile = join(work, 'receiver.log')
    const source = new RedisSecretSource({ client: admin, key: 'bars:c:secret' })
    const forwarder = await startForwarder()
    try {
      const endpoint = await registerEndpoint({ service, url: forwarder.url, source, log: false })
      const right = (await source.read()).secrets
      await source.write({ secrets: ['svc_whsec_a_wrong_secret_deployed'] })
      const receiver = await startReceiver({ LC_REDIS_URL: redis.url, LC_SECRET_KEY: 'bars:c:secret', LC_LOG_FILE: logFile })
      forwarder.backends.push(receiver.port)
      const sent: string[] = []
      for (let i = 0; i < 40; i++) {
        sent.push(emulator.send(endpoint.id))
        await sleep(50)
      }
      await emulator.settled()
      expect((await runs()).size).toBe(0)
      const states = emulator.deliveries().filter((d) => d.endpointId === endpoint.id)
      const refused = states.filter((d) => d.state === 'dropped').map((d) => d.id)
      const held = states.filter((d) => d.state === 'held').map((d) => d.id)
      expect(refused.length + held.length).toBe(40)
      expect(emulator.endpoint(endpoint.id)?.enabled).toBe(false)
      // The log names the first refusal at once and the rest in the summary that ends its 10 s window.
      await until(() => / more in /.test(readFileSync(logFile, 'utf8')), 'the refusal summary in the log', 15_000)

      await source.write({ secrets: right })
      await cli('endpoints', 'enable', endpoint.id)
      const resent = await cli('endpoints', 'resend', '--from-log', logFile)
      // Every refusal is in the log: the ones the sender dropped, and an attempt that was on the
      // wire when the endpoint was disabled (refused too, then held).
      const named = Number(/(\d+) resent, 0 failed/.exec(resent)?.[1])
      for (const id of refused) expect(resent).toContain(`resent ${id}`)
      expect(named).toBeGreaterThanOrEqual(refused.length)
      // The held ones never reached the receiver, so no log names them: their ids come from the service.
      await cli('endpoints', 'resend', ...held)
      await emulator.settled()
      const ran = await runs()
      console.log(`lifecycle bar c: ${refused.length} refused (in the log), ${held.length} held after the disable; ${[...ran.values()].filter((n) => n === 1).length} of 40 ran once`)
      for (const id of sent) expect(ran.get(id), `delivery ${id}`).toBe(1)
      await receiver.stop()
    } finally {
      await forwarder.close()
      await emulator.close()
    }
  })
})
