/**
 * The inbox examples run as a user runs them: `node server.mjs` (and `node worker.mjs`) in
 * examples/inbox-memory, inbox-redis, inbox-postgres, inbox-bullmq and inbox-pg-boss, with REDIS_URL / DATABASE_URL pointing
 * at a real redis-server / Postgres started on 127.0.0.1, deliveries signed with
 * `svc-webhooks/testing`. Each: 202 once accepted, then the handler's line in the output, a
 * resend 200 duplicate and never run twice, SIGTERM exits 0, a busy port exits 1 with the reason.
 * Where redis-server or Postgres is missing the suite skips with the reason, except under
 * CI=true, where it fails; a server that is installed but does not start fails the suite.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer, type Server } from 'node:net'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const ROOT = resolve(import.meta.dirname, '../..')
const SECRET = 'svc_whsec_examples_inbox_tests'
/** Longest wait for one line of output, or for an exit. */
const WAIT_MS = 15_000

interface Example {
  child: ChildProcess
  /** Every line printed so far, stdout and stderr. */
  lines: string[]
  /** Resolves with the first line matching `pattern` (already printed or to come), within WAIT_MS. */
  line(pattern: RegExp): Promise<string>
  /** Resolves with the exit code (a signal name if killed by one), within WAIT_MS. */
  exited(): Promise<number | string>
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** Polls `find` every 20 ms until it returns something, for at most WAIT_MS. */
async function until<T>(find: () => T | undefined, timeoutMessage: () => string): Promise<T> {
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(timeoutMessage())
    await sleep(20)
  }
}

const started: ChildProcess[] = []
afterAll(() => {
  // A test that failed midway leaves its processes: kill exactly those.
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

/** `node <file>` in examples/<dir>, with only the variables a user would set (NODE_ENV=production, as a deployed server runs). */
function runExample(dir: string, file: string, env: Record<string, string>): Example {
  const child = spawn(process.execPath, [file], {
    cwd: join(ROOT, 'examples', dir),
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', SVC_WEBHOOK_SECRET: SECRET, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  started.push(child)
  const lines: string[] = []
  let closed = false
  for (const stream of [child.stdout!, child.stderr!]) {
    let partial = ''
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n')
      partial = parts.pop()!
      lines.push(...parts)
    })
  }
  const exit = new Promise<number | string>((done) =>
    child.once('close', (code, signal) => {
      closed = true
      done(code ?? signal ?? 'unknown')
    }),
  )
  const output = () => `${dir}/${file} printed:\n${lines.join('\n')}`
  return {
    child,
    lines,
    line: (pattern) =>
      until(
        () => {
          const found = lines.find((l) => pattern.test(l))
          if (found === undefined && closed) throw new Error(`exited before printing ${pattern}; ${output()}`)
          return found
        },
        () => `no line matching ${pattern} within ${WAIT_MS} ms; ${output()}`,
      ),
    exited() {
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<never>((_, fail) => (timer = setTimeout(() => fail(new Error(`did not exit within ${WAIT_MS} ms; ${output()}`)), WAIT_MS)))
      return Promise.race([exit, late]).finally(() => clearTimeout(timer))
    },
  }
}

/** Starts an example's server on a free port and waits for its "receiving" line. */
async function startServer(dir: string, env: Record<string, string> = {}): Promise<{ server: Example; port: number }> {
  const port = await freePort()
  const server = runExample(dir, 'server.mjs', { PORT: String(port), ...env })
  await server.line(/receiving into a \w+Inbox on http:\/\/127\.0\.0\.1:\d+\/webhooks\/svc/)
  return { server, port }
}

async function post(port: number, signed: SignedWebhook): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
  return { status: response.status, body: await response.json() }
}

const deliver = (id?: string) => signWebhook({ secret: SECRET, event: sampleEvent('message.received'), ...(id ? { id } : {}) })
const processedLine = (id: string) => new RegExp(`^processed message\\.received ${id}$`)

/**
 * The walk every example must pass: a delivery is 202 and its handler line follows, the same
 * delivery resent (new timestamp, same id, as the sender retries) is 200 duplicate, the handler
 * ran once, SIGTERM exits 0.
 */
async function acceptProcessResendStop(dir: string, env: Record<string, string> = {}): Promise<void> {
  const { server, port } = await startServer(dir, env)
  const first = await deliver()
  expect(await post(port, first)).toEqual({ status: 202, body: { ok: true, accepted: true } })
  await server.line(processedLine(first.id))
  const resent = await deliver(first.id)
  expect(await post(port, resent)).toEqual({ status: 200, body: { ok: true, duplicate: true } })
  server.child.kill('SIGTERM')
  expect(await server.exited()).toBe(0)
  expect(server.lines.filter((l) => processedLine(first.id).test(l))).toHaveLength(1)
}

/** A port held by another listener: the example must exit 1 and say why. */
async function busyPort(dir: string, env: Record<string, string> = {}): Promise<void> {
  const holder: Server = createServer()
  await new Promise<void>((done) => holder.listen(0, '127.0.0.1', done))
  try {
    const port = (holder.address() as { port: number }).port
    const example = runExample(dir, 'server.mjs', { PORT: String(port), ...env })
    expect(await example.exited()).toBe(1)
    expect(example.lines.join('\n')).toContain(`port ${port} is already in use`)
  } finally {
    await new Promise((done) => holder.close(done))
  }
}

describe('examples/inbox-memory', () => {
  it('answers 202, the in-process worker prints the handler line, a resend is 200 duplicate, SIGTERM exits 0', async () => {
    await acceptProcessResendStop('inbox-memory')
  })

  it('exits 1 saying the port is in use when it is', async () => {
    await busyPort('inbox-memory')
  })
})

describeWithRedis('examples/inbox-redis', () => {
  let redis: RedisServer
  const env = () => ({ REDIS_URL: redis.url })
  beforeAll(async () => {
    redis = await startRedisServer()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('server.mjs answers 202, its worker prints the handler line, a resend is 200 duplicate, SIGTERM exits 0', async () => {
    await acceptProcessResendStop('inbox-redis', env())
  })

  it('with INBOX_WORKER=off, two worker.mjs processes run each accepted delivery once; SIGTERM exits 0 for all three', async () => {
    const { server, port } = await startServer('inbox-redis', { ...env(), INBOX_WORKER: 'off' })
    expect(server.lines.join('\n')).toContain('accept only')
    const workers = [runExample('inbox-redis', 'worker.mjs', env()), runExample('inbox-redis', 'worker.mjs', env())]
    await Promise.all(workers.map((w) => w.line(/^Worker \d+ taking deliveries from Redis/)))
    const deliveries = await Promise.all(Array.from({ length: 10 }, () => deliver()))
    for (const signed of deliveries) expect(await post(port, signed)).toEqual({ status: 202, body: { ok: true, accepted: true } })
    const all = [server, ...workers]
    const workerLines = () => workers.flatMap((w) => w.lines)
    await until(
      () => (deliveries.every((d) => workerLines().some((l) => processedLine(d.id).test(l))) ? true : undefined),
      () => `the workers did not process all 10 deliveries within ${WAIT_MS} ms:\n${workerLines().join('\n')}`,
    )
    expect(await post(port, await deliver(deliveries[0]!.id))).toEqual({ status: 200, body: { ok: true, duplicate: true } })
    for (const example of all) example.child.kill('SIGTERM')
    expect(await Promise.all(all.map((e) => e.exited()))).toEqual([0, 0, 0])
    // Each handler ran exactly once across the two workers, and never in the accept-only server.
    for (const d of deliveries) {
      expect(workerLines().filter((l) => processedLine(d.id).test(l))).toHaveLength(1)
    }
    expect(server.lines.filter((l) => l.startsWith('processed'))).toEqual([])
  })

  it('exits 1 saying the port is in use when it is', async () => {
    await busyPort('inbox-redis', env())
  })
})

describeWithPostgres('examples/inbox-postgres', () => {
  let postgres: PostgresServer
  const env = () => ({ DATABASE_URL: postgres.url })
  beforeAll(async () => {
    postgres = await startPostgresServer()
  })
  afterAll(async () => {
    await postgres?.stop()
  })

  it('server.mjs creates its tables, answers 202, its worker prints the handler line, a resend is 200 duplicate, SIGTERM exits 0', async () => {
    await acceptProcessResendStop('inbox-postgres', env())
  })

  it('exits 1 saying the port is in use when it is', async () => {
    await busyPort('inbox-postgres', env())
  })
})

describeWithRedis('examples/inbox-bullmq', () => {
  let redis: RedisServer
  const env = () => ({ REDIS_URL: redis.url })
  beforeAll(async () => {
    redis = await startRedisServer()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('server.mjs answers 202, its BullMQ Worker prints the handler line, a resend is 200 duplicate, SIGTERM exits 0', async () => {
    await acceptProcessResendStop('inbox-bullmq', env())
  })

  it('exits 1 saying the port is in use when it is', async () => {
    await busyPort('inbox-bullmq', env())
  })
})

describeWithPostgres('examples/inbox-pg-boss', () => {
  let postgres: PostgresServer
  const env = () => ({ DATABASE_URL: postgres.url })
  beforeAll(async () => {
    postgres = await startPostgresServer()
  })
  afterAll(async () => {
    await postgres?.stop()
  })

  it('server.mjs answers 202, boss.work prints the handler line, a resend is 200 duplicate, SIGTERM exits 0', async () => {
    await acceptProcessResendStop('inbox-pg-boss', env())
  })

  it('exits 1 saying the port is in use when it is', async () => {
    await busyPort('inbox-pg-boss', env())
  })
})
