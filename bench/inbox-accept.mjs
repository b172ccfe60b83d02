/**
 * `node bench/inbox-accept.mjs` (after `npm run build`): what the durable inbox costs on the
 * request path, and what workers drain, against one redis-server of its own on a free port of
 * 127.0.0.1 (found through the test support, as bench:store does).
 *
 * 1. Accept path, req/s over real HTTP (autocannon 9, pinned), each receiver in a server process
 *    of its own (Express 5 and node:http) with one ioredis client, no worker running:
 *    - store: `webhooks({ secret, store: new RedisStore({ client }), on: { 'message.received': () => {} } })`,
 *      the receiver that runs the handler in the request (claim, handler, complete);
 *    - inbox: `webhooks({ secret, inbox: new RedisInbox({ client }) })`, answered 202 once Redis
 *      acknowledged the append;
 *    - bullmq: `webhooks({ secret, inbox: new BullMQInbox({ queue }) })` over a BullMQ `Queue` on
 *      the same Redis (its own connection, BullMQ's defaults): one transaction per append;
 *    - pg-boss: `webhooks({ secret, inbox: new PgBossInbox({ boss, queue }) })` over a `PgBoss` (a
 *      pool of 10) on a Postgres of the bench's own, fsync on with Redis persistence, off without;
 *      measured with it on that Postgres (a pool of 10 each), pg-store:
 *      `webhooks({ secret, store: new PostgresStore({ pool }), on })`, the receiver that runs the
 *      handler in the request there, and pg-inbox: `webhooks({ secret, inbox: new PostgresInbox({ pool }) })`.
 *    Targets (printed with each row): the Redis accept paths (inbox, bullmq) >= 90 % of the
 *    RedisStore receiver on the same server; pg-boss >= 90 % of the PostgresStore receiver on the
 *    same Postgres, its same-database baseline (a commit that waits for fsync cannot keep up with
 *    Redis: the PostgresStore receiver itself is far below RedisStore, see the table), with its
 *    ratio to RedisStore and to PostgresInbox shown beside it. Every request is a distinct delivery,
 *    signed as autocannon sends it (fresh id, current second; v2 only, as the service's current
 *    deliveries verify), so nothing is a duplicate and no pre-signed pool can run out however
 *    fast the machine is. Bodies: a 1 KiB `message.received` (bench/deliveries.mjs). Per server
 *    and Redis setting, both receivers run side by side and are measured in turn, round after
 *    round, alternating which goes first (store, inbox, inbox, store, ...), Redis emptied before
 *    each measurement; req/s are medians over rounds, and "inbox vs store" is the median of the
 *    rounds' ratios (each round's pair ran back to back, so a machine shared with other jobs
 *    moves both alike).
 * 2. Worker deliveries/s per Redis: N deliveries appended, then K worker processes
 *    (`createInboxWorker`, no-op handler, default concurrency 4 each) started at once; the time
 *    until the inbox is empty. Each worker reports how many it processed: the sum must be N.
 *
 * Both run once per Redis persistence setting: none (`--save '' --appendonly no`) and AOF with
 * `appendfsync everysec`; `--persistence none,everysec,always` adds `appendfsync always`.
 * Prints markdown tables; writes docs/benchmarks-inbox.json unless --no-write. Exits 1 (after
 * printing) when any request was answered non-2xx or failed, or a drain did not finish.
 *
 * Options (defaults take about 6 minutes): --modes store,inbox,bullmq,pg-boss (store is always
 * measured: the others are compared with it; pg-boss brings pg-store and pg-inbox, which can
 * also be named alone), --duration 2 (s per measurement), --warmup 1,
 * --rounds 5, --connections 16, --servers express,node, --persistence none,everysec,
 * --drain 20000 (N), --workers 1,4 (K values), --concurrency 4 (per worker), --quick (1 s, 2
 * rounds, N 2000, K 2: about 30 s), --no-write.
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SELF = fileURLToPath(import.meta.url)
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWluYm94LTMyLWJ5dGVzLS0'
const PATH = '/webhooks/svc'
const BODY_BYTES = 1024
const PERSISTENCE = {
  none: { label: 'none', persist: false },
  everysec: { label: 'AOF, appendfsync everysec', persist: true, fsync: 'everysec' },
  always: { label: 'AOF, appendfsync always', persist: true, fsync: 'always' },
}
const SERVERS = { express: 'Express 5', node: 'node:http' }
const MODES = { store: 'RedisStore receiver', inbox: 'RedisInbox accept', bullmq: 'BullMQInbox accept', 'pg-boss': 'PgBossInbox accept', 'pg-store': 'PostgresStore receiver', 'pg-inbox': 'PostgresInbox accept' }
/** The baselines measured beside an accept path, not accept paths checked themselves. */
const BASELINES = new Set(['store', 'pg-store', 'pg-inbox'])
/** Each accept path's target: at least 90 % of this receiver's req/s on the same server. */
const TARGET = { inbox: 'store', bullmq: 'store', 'pg-boss': 'pg-store' }


// ---------------------------------------------------------------------------------------------
// Child processes

/** Resolves when the parent closes our stdin (it stopped us, or died). */
function parentGone() {
  return new Promise((resolve) => {
    process.stdin.resume()
    process.stdin.once('end', resolve)
  })
}

async function connectRedis(url) {
  const { Redis } = await import('ioredis')
  const client = new Redis(url, { lazyConnect: true })
  client.on('error', (error) => console.error(`bench child: Redis: ${error.message}`))
  await client.connect()
  return client
}

/** The receiver's options for `mode`, and what closes the engine's connections. */
async function receiverOptions(mode, client, url, postgresUrl) {
  const { RedisInbox, RedisStore } = await import('svc-webhooks/redis')
  if (mode === 'store') return { options: { secret: SECRET, store: new RedisStore({ client }), on: { 'message.received': () => {} } }, close: async () => {} }
  if (mode === 'inbox') return { options: { secret: SECRET, inbox: new RedisInbox({ client }) }, close: async () => {} }
  if (mode === 'bullmq') {
    const { Queue } = await import('bullmq')
    const { BullMQInbox } = await import('svc-webhooks/bullmq')
    const queue = new Queue('bench', { connection: { url } })
    queue.on('error', (error) => console.error(`bench child: BullMQ: ${error.message}`))
    return { options: { secret: SECRET, inbox: new BullMQInbox({ queue }) }, close: () => queue.close() }
  }
  if (mode === 'pg-store') {
    const { default: pg } = await import('pg')
    const { PostgresStore } = await import('svc-webhooks/postgres')
    const pool = new pg.Pool({ connectionString: postgresUrl, max: 10 })
    pool.on('error', (error) => console.error(`bench child: Postgres: ${error.message}`))
    const store = new PostgresStore({ pool })
    await store.ensureTable()
    return { options: { secret: SECRET, store, on: { 'message.received': () => {} } }, close: () => pool.end() }
  }
  if (mode === 'pg-inbox') {
    const { default: pg } = await import('pg')
    const { PostgresInbox } = await import('svc-webhooks/postgres')
    const pool = new pg.Pool({ connectionString: postgresUrl, max: 10 })
    pool.on('error', (error) => console.error(`bench child: Postgres: ${error.message}`))
    const inbox = new PostgresInbox({ pool })
    await inbox.ensureTable()
    return { options: { secret: SECRET, inbox }, close: () => pool.end() }
  }
  if (mode === 'pg-boss') {
    const { PgBoss } = await import('pg-boss')
    const { PgBossInbox } = await import('svc-webhooks/pg-boss')
    const boss = new PgBoss({ connectionString: postgresUrl, max: 10 })
    boss.on('error', (error) => console.error(`bench child: pg-boss: ${error.message}`))
    await boss.start()
    await boss.createQueue('bench')
    return { options: { secret: SECRET, inbox: new PgBossInbox({ boss, queue: 'bench' }) }, close: () => boss.stop({ graceful: false }) }
  }
  throw new Error(`bench:inbox: unknown mode ${mode}`)
}

/** `serve <server> <mode> <redis url> [<postgres url>]`: one server, prints `{"port":n}`, exits when stdin ends. */
async function serve(server, mode, url, postgresUrl) {
  const client = await connectRedis(url)
  const { options, close } = await receiverOptions(mode, client, url, postgresUrl)
  const { createServer } = await import('node:http')
  let handler
  if (server === 'express') {
    const { default: express } = await import('express')
    const { webhooks } = await import('svc-webhooks/express')
    handler = express().post(PATH, webhooks(options))
  } else if (server === 'node') {
    const { createNodeHandler } = await import('svc-webhooks/node')
    handler = createNodeHandler(options)
  } else throw new Error(`bench:inbox: unknown server ${server}`)
  const http = createServer(handler)
  await new Promise((resolve, reject) => http.once('error', reject).listen(0, '127.0.0.1', resolve))
  console.log(JSON.stringify({ port: http.address().port }))
  // `cpu`: this process's CPU time so far, in microseconds (user + system).
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line !== 'cpu') return
    const { user, system } = process.cpuUsage()
    console.log(JSON.stringify({ cpu: user + system }))
  })
  await parentGone()
  await close().catch(() => undefined)
  client.disconnect()
  process.exit(0)
}

/** `work <redis url> <concurrency>`: a worker that starts on the line `go`; prints `{"processed":n}` once stdin ends. */
async function work(url, concurrency) {
  const client = await connectRedis(url)
  const { createInboxWorker } = await import('svc-webhooks')
  const { RedisInbox } = await import('svc-webhooks/redis')
  let processed = 0
  const outcomes = {}
  const worker = createInboxWorker({
    inbox: new RedisInbox({ client }),
    concurrency: Number(concurrency),
    on: { 'message.received': () => {} },
    onResult: (result) => {
      outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1
      if (result.outcome === 'processed') processed++
    },
    onError: (error) => console.error(`bench worker: ${error?.message ?? error}`),
  })
  createInterface({ input: process.stdin }).on('line', (line) => line === 'go' && worker.start())
  console.log(JSON.stringify({ ready: true }))
  await parentGone()
  await worker.stop(5_000)
  console.log(JSON.stringify({ processed, outcomes }))
  client.disconnect()
  process.exit(0)
}

// ---------------------------------------------------------------------------------------------
// Parent

/**
 * Spawns `node bench/inbox-accept.mjs <args>`: resolves its first stdout line (JSON), `ask(line)`
 * (writes a line, resolves the next one it prints) and `stop()`.
 */
async function child(args, what) {
  const proc = spawn(process.execPath, [SELF, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  const queue = []
  const waiting = []
  let closed = false
  const closedPromise = new Promise((resolve) => proc.once('close', resolve)).then(() => {
    closed = true
    for (const w of waiting.splice(0)) w.reject(new Error(`bench:inbox: ${what} exited (${proc.exitCode ?? proc.signalCode})`))
  })
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const w = waiting.shift()
    if (w) w.resolve(line)
    else queue.push(line)
  })
  const next = () => {
    if (queue.length > 0) return Promise.resolve(JSON.parse(queue.shift()))
    if (closed) return Promise.reject(new Error(`bench:inbox: ${what} exited (${proc.exitCode ?? proc.signalCode})`))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(entry), 1)
        reject(new Error(`bench:inbox: ${what} said nothing within 30 s`))
      }, 30_000)
      const entry = { resolve: (line) => (clearTimeout(timer), resolve(JSON.parse(line))), reject: (error) => (clearTimeout(timer), reject(error)) }
      waiting.push(entry)
    })
  }
  let first
  try {
    first = await next()
  } catch (error) {
    proc.kill('SIGKILL')
    throw error
  }
  let stopped
  return {
    first,
    send: (line) => proc.stdin.write(`${line}\n`),
    ask: (line) => (proc.stdin.write(`${line}\n`), next()),
    /** Closes its stdin (it exits by itself), SIGKILL after 10 s; resolves the last JSON line it printed, if any. */
    stop() {
      stopped ??= (async () => {
        const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000)
        if (!closed) proc.stdin.end()
        await closedPromise
        clearTimeout(timer)
        const last = queue.at(-1)
        return last === undefined ? undefined : JSON.parse(last)
      })()
      return stopped
    },
  }
}

function parseOptions() {
  const argv = process.argv.slice(2)
  const quick = argv.includes('--quick')
  const value = (name, fallback) => {
    const i = argv.indexOf(name)
    return i === -1 ? fallback : argv[i + 1]
  }
  const int = (name, fallback, max) => {
    const n = Number(value(name, fallback))
    if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`bench:inbox: --${name.slice(2)} takes 1 to ${max}`)
    return n
  }
  const list = (name, fallback, known) =>
    String(value(name, fallback))
      .split(',')
      .map((x) => {
        if (known && !Object.hasOwn(known, x)) throw new Error(`bench:inbox: ${name} takes ${Object.keys(known).join(', ')}, not ${x}`)
        return x
      })
  const workers = list('--workers', quick ? '2' : '1,4').map((x) => {
    const n = Number(x)
    if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error('bench:inbox: --workers takes counts of 1 to 16')
    return n
  })
  return {
    duration: int('--duration', quick ? 1 : 2, 30),
    warmup: int('--warmup', 1, 10),
    rounds: int('--rounds', quick ? 2 : 5, 15),
    connections: int('--connections', 16, 256),
    servers: list('--servers', 'express,node', SERVERS),
    modes: withPgStore(['store', ...list('--modes', 'store,inbox,bullmq,pg-boss', MODES).filter((mode) => mode !== 'store')]),
    persistence: list('--persistence', 'none,everysec', PERSISTENCE),
    drain: int('--drain', quick ? 2000 : 20_000, 200_000),
    workers,
    concurrency: int('--concurrency', 4, 256),
    write: !argv.includes('--no-write'),
  }
}

/** pg-boss is measured beside the store and the inbox on its own backend too. */
const withPgStore = (modes) => (modes.includes('pg-boss') ? [...new Set([...modes, 'pg-store', 'pg-inbox'])] : modes)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const fmt = (n) => Math.round(n).toLocaleString('en-US')

/** A redis-server of our own with `setting`'s persistence, an admin client, and reset(). */
async function startRedis(setting) {
  const support = await import('../tools/redis.mjs')
  if (!support.findRedisServer()) throw new Error('bench:inbox: redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN)')
  const server = await support.startRedisServer({ persist: setting.persist })
  const { Redis } = await import('ioredis')
  const admin = new Redis(server.url, { lazyConnect: true })
  try {
    await admin.connect()
    // The support turns AOF on with `appendfsync always`; the setting picks the policy.
    if (setting.persist) await admin.config('SET', 'appendfsync', setting.fsync)
    const config = Object.fromEntries(chunk(await admin.config('GET', 'append*')))
    const version = (await admin.info('server')).match(/redis_version:(\S+)/)?.[1] ?? 'unknown'
    return {
      url: server.url,
      admin,
      version,
      config: { appendonly: config.appendonly, appendfsync: config.appendfsync },
      /** Empties Redis; with AOF, also rewrites the file small so the disk use stays bounded, and waits for that to end. */
      async reset() {
        await admin.flushall()
        if (!setting.persist) return
        await admin.bgrewriteaof().catch(() => undefined) // "already in progress" is fine
        for (let i = 0; i < 400; i++) {
          const info = await admin.info('persistence')
          if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) return
          await sleep(25)
        }
        throw new Error('bench:inbox: the AOF rewrite did not finish within 10 s')
      },
      async stop() {
        admin.disconnect()
        await server.stop()
      },
    }
  } catch (error) {
    admin.disconnect()
    await server.stop()
    throw error
  }
}

/** A Postgres of our own for pg-boss, fsync as the Redis setting persists; reset() empties pg-boss's jobs. */
async function startPostgres(setting) {
  const support = await import('../tools/postgres.mjs')
  const reason = support.postgresSkipReason()
  if (reason) throw new Error(`bench:inbox: pg-boss needs Postgres: ${reason} (or leave pg-boss out of --modes)`)
  const server = await support.startPostgresServer({ fsync: setting.persist, maxConnections: 100 })
  const { default: pg } = await import('pg')
  const admin = new pg.Client({ connectionString: server.url })
  await admin.connect()
  return {
    url: server.url,
    /** Empties pg-boss's job table (once its schema exists), keeping the queues. */
    async reset() {
      const { rows } = await admin.query("SELECT to_regclass('pgboss.job') AS t")
      if (rows[0].t !== null) await admin.query('TRUNCATE pgboss.job')
      const { rows: store } = await admin.query("SELECT to_regclass('svc_webhooks_deliveries') AS t")
      if (store[0].t !== null) await admin.query('TRUNCATE svc_webhooks_deliveries')
      const { rows: inbox } = await admin.query("SELECT to_regclass('svc_webhooks_inbox') AS t")
      if (inbox[0].t !== null) await admin.query('TRUNCATE svc_webhooks_inbox, svc_webhooks_inbox_keys')
    },
    async stop() {
      await admin.end()
      await server.stop()
    },
  }
}

/** redis-server's CPU time so far (all its threads, user + system), in microseconds. */
async function redisCpu(admin) {
  const info = await admin.info('cpu')
  const seconds = (name) => Number(info.match(new RegExp(`^${name}:([\\d.]+)`, 'm'))?.[1] ?? NaN)
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6
}

function chunk(flat) {
  const pairs = []
  for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i], flat[i + 1]])
  return pairs
}

async function main() {
  const options = parseOptions()
  const started = Date.now()
  const { default: autocannon } = await import('autocannon')
  const { signWebhook } = await import('svc-webhooks/testing')
  const { paddedEvent } = await import('./deliveries.mjs')
  const { createHmac, createSecretKey } = await import('node:crypto')

  // Each request is signed as autocannon sends it: a fresh id and the current second.
  const key = createSecretKey(Buffer.from(SECRET, 'utf8'))
  const template = await signWebhook({ secret: SECRET, event: paddedEvent(BODY_BYTES), id: 'warm', schemes: ['v2'] })
  const base = { ...template.headers }
  let sequence = 0
  function sign() {
    const timestamp = String(Math.floor(Date.now() / 1000))
    const id = `evt_${process.pid}_${sequence++}`
    const v2 = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(template.rawBody).digest('hex')
    return { ...base, 'svc-webhook-id': id, 'svc-webhook-timestamp': timestamp, 'svc-webhook-signature-v2': `v2=${v2}` }
  }

  async function load(port, seconds) {
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: options.connections,
      duration: seconds,
      requests: [{ method: 'POST', path: PATH, setupRequest: (request) => ({ ...request, headers: sign(), body: template.body }) }],
    })
    return {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      total: result.requests.total,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
    }
  }

  const redis = {}
  const postgres = {}
  const problems = []
  try {
    for (const name of options.persistence) redis[name] = await startRedis(PERSISTENCE[name])
    if (options.modes.some((mode) => mode.startsWith('pg-'))) for (const name of options.persistence) postgres[name] = await startPostgres(PERSISTENCE[name])
    const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGB: Math.round(totalmem() / 2 ** 30), node: process.versions.node }
    const redisVersion = Object.values(redis)[0].version
    console.error(
      `bench:inbox: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, redis-server ${redisVersion}; ` +
        `${options.connections} connections, ${options.duration} s per case after ${options.warmup} s warm-up, ${options.rounds} round(s)`,
    )

    // 1. Accept path. Per (persistence, server): every mode's server started and warmed, then
    // measured in turn, the order reversed every other round (ABBA), so each round's slices see
    // the same machine: the ratio within a round holds even where other load comes and goes.
    const cases = []
    for (const persistence of options.persistence) {
      for (const server of options.servers) {
        const r = redis[persistence]
        const label = (mode) => `${SERVERS[server]} ${mode} (Redis persistence: ${PERSISTENCE[persistence].label})`
        const procs = {}
        try {
          for (const mode of options.modes) procs[mode] = await child(['serve', server, mode, r.url, postgres[persistence]?.url ?? ''], label(mode))
          for (const mode of options.modes) await load(procs[mode].first.port, options.warmup)
          const group = Object.fromEntries(options.modes.map((mode) => [mode, { persistence, server, mode, rounds: [] }]))
          for (let round = 0; round < options.rounds; round++) {
            for (const mode of round % 2 === 0 ? options.modes : [...options.modes].reverse()) {
              // Requests still in flight when the last load stopped finish first; then Redis (and
              // pg-boss's jobs) are emptied, so every mode is measured from the same empty server.
              await sleep(250)
              await r.reset()
              await postgres[persistence]?.reset()
              const before = [(await procs[mode].ask('cpu')).cpu, await redisCpu(r.admin)]
              const measured = await load(procs[mode].first.port, options.duration)
              const after = [(await procs[mode].ask('cpu')).cpu, await redisCpu(r.admin)]
              measured.serverCpuUs = (after[0] - before[0]) / measured.total
              measured.redisCpuUs = (after[1] - before[1]) / measured.total
              if (measured.non2xx > 0 || measured.errors > 0) problems.push(`${label(mode)}, round ${round + 1}: ${measured.non2xx} non-2xx answers, ${measured.errors} errors`)
              group[mode].rounds.push(measured)
              console.error(
                `  round ${round + 1}: ${label(mode).padEnd(72)} ${fmt(measured.rps).padStart(6)} req/s, p99 ${measured.p99} ms, ` +
                  `CPU per request: server ${measured.serverCpuUs.toFixed(0)} µs${mode.startsWith('pg-') ? '' : `, Redis ${measured.redisCpuUs.toFixed(0)} µs`}`,
              )
            }
          }
          cases.push(...Object.values(group))
        } finally {
          await Promise.all(Object.values(procs).map((p) => p.stop()))
        }
      }
    }

    // One row per (persistence, server, accept path), each beside the store receiver it ran with.
    const accept = []
    const summary = (c) => ({
      rps: median(c.rounds.map((x) => x.rps)),
      p99: median(c.rounds.map((x) => x.p99)),
      serverCpuUs: median(c.rounds.map((x) => x.serverCpuUs)),
      redisCpuUs: median(c.rounds.map((x) => x.redisCpuUs)),
      rounds: c.rounds,
    })
    for (const persistence of options.persistence) {
      for (const server of options.servers) {
        const find = (mode) => cases.find((c) => c.persistence === persistence && c.server === server && c.mode === mode)
        const store = find('store')
        const ratios = (inbox, base) => inbox.rounds.map((x, i) => x.rps / base.rounds[i].rps)
        for (const mode of options.modes.filter((m) => !BASELINES.has(m))) {
          const inbox = find(mode)
          const row = { server: SERVERS[server], persistence: PERSISTENCE[persistence].label, mode, path: MODES[mode], store: summary(store), inbox: summary(inbox) }
          row.roundRatios = ratios(inbox, store)
          row.ratio = median(row.roundRatios)
          if (mode === 'pg-boss') {
            const own = find('pg-store')
            row.ownStore = summary(own)
            row.ownRoundRatios = ratios(inbox, own)
            row.ownRatio = median(row.ownRoundRatios)
            const pgInbox = find('pg-inbox')
            if (pgInbox) {
              row.pgInbox = summary(pgInbox)
              row.pgInboxRatio = median(ratios(inbox, pgInbox))
              row.pgInboxVsStore = median(ratios(pgInbox, store))
            }
            row.ownStoreVsStore = median(ratios(own, store))
          }
          // The ratio the target is checked on: against the receiver TARGET names, measured beside it.
          row.target = `>= 90 % of ${MODES[TARGET[mode]]}`
          row.targetRatio = TARGET[mode] === 'pg-store' ? row.ownRatio : row.ratio
          row.targetRoundRatios = TARGET[mode] === 'pg-store' ? row.ownRoundRatios : row.roundRatios
          accept.push(row)
        }
      }
    }

    // 2. Workers: N appended deliveries drained by K worker processes.
    const { RedisInbox } = await import('svc-webhooks/redis')
    const drains = []
    for (const persistence of options.persistence) {
      const r = redis[persistence]
      for (const count of options.workers) {
        await r.reset()
        const label = `${count} worker${count > 1 ? 's' : ''} x concurrency ${options.concurrency}`
        const procs = []
        try {
          for (let i = 0; i < count; i++) procs.push(await child(['work', r.url, String(options.concurrency)], `worker ${i + 1}`))
          const inbox = new RedisInbox({ client: r.admin })
          await fill(inbox, options.drain)
          const before = await inbox.stats()
          if (before.depth !== options.drain) throw new Error(`bench:inbox: the inbox holds ${before.depth} deliveries after appending ${options.drain}`)
          const t0 = performance.now()
          for (const proc of procs) proc.send('go')
          let stats = before
          const deadline = t0 + 60_000
          while (stats.depth > 0 && performance.now() < deadline) {
            await sleep(10)
            stats = await inbox.stats()
          }
          const seconds = (performance.now() - t0) / 1000
          const reports = await Promise.all(procs.splice(0).map((p) => p.stop()))
          const processed = reports.reduce((sum, x) => sum + (x?.processed ?? 0), 0)
          const done = options.drain - stats.depth
          if (stats.depth > 0) problems.push(`workers (${label}, ${PERSISTENCE[persistence].label}): ${stats.depth} of ${options.drain} deliveries left after 60 s`)
          if (processed !== done || stats.dead > 0) problems.push(`workers (${label}, ${PERSISTENCE[persistence].label}): ${processed} processed for ${done} drained, ${stats.dead} dead`)
          const row = { persistence: PERSISTENCE[persistence].label, workers: count, concurrency: options.concurrency, deliveries: done, seconds, perSecond: done / seconds, processed }
          drains.push(row)
          console.error(`  drain: ${label}, Redis persistence: ${row.persistence}: ${fmt(done)} deliveries in ${seconds.toFixed(2)} s, ${fmt(row.perSecond)}/s`)
        } finally {
          await Promise.all(procs.map((p) => p.stop()))
        }
      }
    }

    // Tables.
    const pct = (x) => `${(x * 100).toFixed(1)} %`
    const acceptTable = [
      '| server | Redis persistence | accept path | target | vs its target, median of rounds | each round | RedisStore receiver req/s | accept req/s | accept vs RedisStore | store p99 | accept p99 | on its own backend: PostgresStore receiver req/s (vs RedisStore), PostgresInbox accept req/s (vs RedisStore) |',
      '|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|',
      ...accept.map(
        (r) =>
          `| ${r.server} | ${r.persistence} | ${r.path} | ${r.target} | ${pct(r.targetRatio)}${r.targetRatio >= 0.9 ? '' : ' (missed)'} | ${r.targetRoundRatios.map((x) => `${(x * 100).toFixed(0)} %`).join(', ')} | ${fmt(r.store.rps)} | ${fmt(r.inbox.rps)} | ${pct(r.ratio)} | ${r.store.p99} ms | ${r.inbox.p99} ms | ` +
          `${r.ownStore ? `${fmt(r.ownStore.rps)} (${pct(r.ownStoreVsStore)})${r.pgInbox ? `, ${fmt(r.pgInbox.rps)} (${pct(r.pgInboxVsStore)})` : ''}` : '-'} |`,
      ),
    ].join('\n')
    // Redis's CPU is not pg-boss's cost: Postgres runs as several processes, not measured here.
    const backendCpu = (r, c) => (r.mode === 'pg-boss' && c === r.inbox ? 'n/a' : c.redisCpuUs.toFixed(0))
    const cpuTable = [
      '| server | Redis persistence | accept path | RedisStore receiver: server / Redis CPU µs per request | accept: server / Redis CPU µs per request |',
      '|---|---|---|---:|---:|',
      ...accept.map((r) => `| ${r.server} | ${r.persistence} | ${r.path} | ${r.store.serverCpuUs.toFixed(0)} / ${backendCpu(r, r.store)} | ${r.inbox.serverCpuUs.toFixed(0)} / ${backendCpu(r, r.inbox)} |`),
    ].join('\n')
    const drainTable = [
      '| Redis persistence | worker processes x concurrency | deliveries | seconds | deliveries/s |',
      '|---|---|---:|---:|---:|',
      ...drains.map((d) => `| ${d.persistence} | ${d.workers} x ${d.concurrency} | ${fmt(d.deliveries)} | ${d.seconds.toFixed(2)} | ${fmt(d.perSecond)} |`),
    ].join('\n')
    const misses = accept.filter((r) => r.targetRatio < 0.9).map((r) => `${r.server}, ${r.persistence}: ${r.path} at ${pct(r.targetRatio)} of the ${MODES[TARGET[r.mode]]} (target ${r.target})`)
    console.log(
      `\n${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, redis-server ${redisVersion} on 127.0.0.1; ${BODY_BYTES} B bodies; ` +
        `${options.connections} connections, ${options.duration} s per case after ${options.warmup} s warm-up, median of ${options.rounds} interleaved round(s)\n`,
    )
    console.log(acceptTable)
    console.log('\nCPU time per request (medians over rounds): the server process, and redis-server (all its threads):\n')
    console.log(cpuTable)
    console.log(`\nWorkers draining ${fmt(options.drain)} accepted deliveries (no-op handler):\n`)
    console.log(drainTable)
    console.log(misses.length === 0 ? '\nall targets met' : `\ntargets missed:\n${misses.map((m) => `- ${m}`).join('\n')}`)
    console.error(`bench:inbox: ${((Date.now() - started) / 1000).toFixed(0)} s`)
    if (problems.length > 0) {
      console.error(`\nbench:inbox: these figures are not valid:\n${problems.map((p) => `- ${p}`).join('\n')}`)
      process.exitCode = 1
      return
    }
    if (options.write) {
      const out = {
        date: new Date().toISOString(),
        command: `node bench/inbox-accept.mjs ${process.argv.slice(2).join(' ')}`.trim(),
        machine,
        redis: { version: redisVersion, settings: Object.fromEntries(Object.entries(redis).map(([name, r]) => [name, r.config])) },
        bodyBytes: BODY_BYTES,
        ...options,
        accept,
        drains,
        tables: { accept: acceptTable, cpu: cpuTable, drain: drainTable },
      }
      delete out.write
      writeFileSync(join(ROOT, 'docs/benchmarks-inbox.json'), `${JSON.stringify(out, null, 2)}\n`)
      console.error('bench:inbox: wrote docs/benchmarks-inbox.json')
    }
  } finally {
    for (const r of Object.values(redis)) await r.stop()
    for (const p of Object.values(postgres)) await p.stop()
  }
}

/** Appends `count` fresh deliveries, 64 in flight. */
async function fill(inbox, count) {
  const { serializeEvent } = await import('svc-webhooks/testing')
  const { paddedEvent } = await import('./deliveries.mjs')
  const rawBody = new TextEncoder().encode(serializeEvent(paddedEvent(BODY_BYTES)))
  let next = 0
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < count) {
        const id = `drain_${process.pid}_${next++}`
        const appended = await inbox.append({ keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(Date.now() / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody, receivedAt: Date.now() })
        if (appended !== 'accepted') throw new Error(`bench:inbox: a fresh delivery was answered ${appended}`)
      }
    }),
  )
}

// Last, so every top-level const above is initialised.
const [role, ...rest] = process.argv.slice(2)
if (role === 'serve') await serve(...rest)
else if (role === 'work') await work(...rest)
else await main()
