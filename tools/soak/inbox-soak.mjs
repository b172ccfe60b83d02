// @ts-check
// The inbox soak, shared by test/soak/soak.test.ts and `npm run soak -- --inbox redis|postgres`: the
// durable inbox must turn every fault into a delay, never into a lost delivery, a doubled effect
// or a disabled endpoint. Receiver processes (receiver.mjs, `inbox` mode) answer the sender
// simulator (sender.mjs, spec §6.3 rules, disabling the endpoint after 20 consecutive failures)
// and worker processes (worker.mjs, createInboxWorker) run an idempotent handler whose effects
// live in an "application database" (effects.mjs) that survives them. Faults injected:
//
// - duplicates: copies racing the original and manual resends after it was delivered;
// - handler failures at random (`failRate`);
// - a downstream outage (`outageMs`): the handler's database refuses every write, long enough that
//   a receiver answering 5xx for a failing handler would have been disabled;
// - worker processes killed with SIGKILL mid-run (`kills`), each started again `respawnMs` later;
// - the inbox's server killed and started again while workers ack: redis-server (append-only
//   file, fsync always, so an append answered 202 survives) or Postgres (immediate shutdown,
//   recovery on start; on Postgres the handler's database is the same server, so its writes fail
//   meanwhile too). An ack the server did not answer is retried while its lease lasts;
// - hung handlers (`hangRate`): runs that never settle, freed by the workers' `handlerTimeoutMs`;
// - a poison delivery (`poison`): its handler takes the worker process down (an uncaught throw in
//   a timer) every time it runs; crashed workers are started again `respawnMs` later, as a
//   supervisor would. It must cost at most `maxStalledCount + 1` crashes and end in the dead
//   letters, and is the one delivery not expected to be applied.
//
// The verdict is read from the database, not from what the workers say: every delivery's effect
// applied exactly once (none lost, none twice), no permanent 4xx, the sender never saw 20
// consecutive failures. Handler runs repeated after a kill are counted apart: they are what the
// idempotency guard is for.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedisServer } from '../redis.mjs'
import { postgresEffects, redisEffects } from './effects.mjs'
import { connectPostgres, connectRedis, openInbox } from './engines.mjs'
import { startPostgresServer } from '../postgres.mjs'
import { startChild } from './processes.mjs'
import { simulateSender } from './sender.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const SECRET = 'svc_whsec_soak'

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Runs `step` until it succeeds, at most 100 times 100 ms apart: the harness's own writes to a
 * server that may be restarting (on Postgres the handler's database is the inbox's server).
 *
 * @param {() => Promise<unknown>} step
 */
async function persist(step) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step()
    } catch (error) {
      if (attempt >= 100) throw error
      await sleep(100)
    }
  }
}

/**
 * @typedef {object} InboxSoakOptions
 * @property {'redis' | 'postgres'} [engine] Default 'redis'.
 * @property {number} [count] deliveries (distinct ids). Default 4000.
 * @property {number} [concurrency] deliveries in flight at the sender. Default 32.
 * @property {string[]} [clients] one receiver process per entry: the Redis client it uses
 *   ('ioredis' | 'node-redis'; ignored on Postgres). Default ioredis, node-redis.
 * @property {number} [workers] worker processes. Default 3.
 * @property {number} [workerConcurrency] handlers at once per worker. Default 8.
 * @property {number} [failRate] share of handler runs that throw. Default 0.1.
 * @property {number} [duplicateRate] share of deliveries sent twice. Default 0.3.
 * @property {number} [kills] workers killed with SIGKILL, spread over the run. Default 4.
 * @property {number} [respawnMs] how long a killed worker stays dead. Default 300.
 * @property {number} [visibilityMs] the workers' visibility timeout: how long a killed worker's deliveries wait. Default 2000.
 * @property {number | undefined} [restartAt] share of deliveries sent when the inbox's server is killed and restarted (undefined: never). Default 0.45.
 * @property {number} [downMs] how long it stays down before it is started again (starting takes longer: see `unreachableMs`). Default 200.
 * @property {number} [outageAt] share of deliveries sent when the downstream outage starts. Default 0.6.
 * @property {number} [outageMs] how long the handler's database refuses writes. Default 2000.
 * @property {number} [hangRate] share of handler runs that never settle. Default 0.
 * @property {number} [handlerTimeoutMs] the workers' handler deadline. Default 1000.
 * @property {boolean} [poison] one delivery (sent at 30 % of the run) crashes every worker that runs it. Default false.
 * @property {number} [maxStalledCount] the workers' maxStalledCount. Default 3.
 * @property {boolean} [guard] the handler is idempotent (its effect keyed by the delivery id); false shows what happens without. Default true.
 * @property {number} [drainTimeoutMs] longest wait for the workers to empty the inbox after the sender is done. Default 60000.
 * @property {(line: string) => void} [log]
 */

/**
 * @typedef {import('./sender.mjs').SenderFigures & {
 *   engine: string,
 *   restarted: boolean,
 *   unreachableMs: number,
 *   outageMs: number,
 *   sentDuringOutage: number,
 *   killed: number,
 *   crashes: number,
 *   poisonId: string | undefined,
 *   poisonDead: boolean,
 *   poisonApplied: boolean,
 *   otherDead: { id: string, attempts: number, takes: number, lastError: string, applied: boolean }[],
 *   handlerRuns: number,
 *   failuresInjected: number,
 *   hungRuns: number,
 *   refusedByOutage: number,
 *   longestFailingStreak: number,
 *   processed: number,
 *   lost: string[],
 *   appliedTwice: string[],
 *   rerunAfterKill: string[],
 *   rerunOther: string[],
 *   unknown: string[],
 *   answered2xxButNotProcessed: string[],
 *   drained: boolean,
 *   drainMs: number,
 *   inboxAtEnd: import('svc-webhooks').InboxStats | { error: string },
 *   receivers: Record<string, unknown>[],
 *   workerStats: Record<string, unknown>[],
 *   totalMs: number,
 *   maxStalledCount: number,
 * }} InboxSoakFigures
 */

/** The sizes `npm run soak -- --inbox <engine> --quick` and the test suite run: under ~30 s. */
export const QUICK_INBOX_SOAK = Object.freeze({ count: 3000, kills: 3, outageMs: 1500, drainTimeoutMs: 20_000, hangRate: 0.003 })

/**
 * The verdict of an inbox soak in one list: empty for a pass.
 *
 * @param {InboxSoakFigures} f
 * @returns {string[]}
 * @example
 * const problems = inboxSoakProblems(await runInboxSoak())
 */
export function inboxSoakProblems(f) {
  const problems = []
  if (f.lost.length) problems.push(`${f.lost.length} lost`)
  if (f.appliedTwice.length) problems.push(`${f.appliedTwice.length} effects applied twice`)
  if (f.maxConsecutiveFailures >= 20) problems.push(`the sender saw ${f.maxConsecutiveFailures} consecutive failures`)
  if (f.disabled) problems.push('the endpoint was disabled')
  if (f.outageMs > 0 && f.sentDuringOutage < 20) problems.push(`only ${f.sentDuringOutage} deliveries were sent during the outage: too few to show it`)
  if (f.permanent.length) problems.push(`${f.permanent.length} permanent 4xx`)
  if (f.gaveUp.length) problems.push(`${f.gaveUp.length} gave up`)
  if (f.unknown.length) problems.push(`${f.unknown.length} effects for ids never sent`)
  if (!f.drained) problems.push('the inbox did not drain in time')
  if (f.poisonId !== undefined) {
    if (!f.poisonDead) problems.push('the poison delivery is not in the dead letters')
    if (f.poisonApplied) problems.push('the poison delivery was applied')
    if (f.crashes > f.maxStalledCount + 1) problems.push(`the poison delivery cost ${f.crashes} crashes (at most ${f.maxStalledCount + 1})`)
  }
  return problems
}

/**
 * Runs the inbox soak and returns its figures; {@link inboxSoakProblems} says whether it passed.
 *
 * @param {InboxSoakOptions} [options]
 * @returns {Promise<InboxSoakFigures>}
 * @example
 * const figures = await runInboxSoak({ engine: 'redis', ...QUICK_INBOX_SOAK })
 */
export async function runInboxSoak({
  engine = 'redis',
  count = 4000,
  concurrency = 32,
  clients = ['ioredis', 'node-redis'],
  workers = 3,
  workerConcurrency = 8,
  failRate = 0.1,
  duplicateRate = 0.3,
  kills = 4,
  respawnMs = 300,
  visibilityMs = 2000,
  restartAt = 0.45,
  downMs = 200,
  outageAt = 0.6,
  outageMs = 2000,
  hangRate = 0,
  handlerTimeoutMs = 1000,
  poison = false,
  maxStalledCount = 3,
  guard = true,
  drainTimeoutMs = 60_000,
  log = () => {},
} = {}) {
  const started = Date.now()
  /** @type {(() => Promise<unknown>)[]} cleanups, last first */
  const cleanups = []
  /** @type {import('./processes.mjs').SoakChild[]} */
  const workerChildren = []
  /** @type {import('./processes.mjs').SoakChild[]} */
  const receiverChildren = []
  /** @type {import('./processes.mjs').SoakChild[]} every worker ever started, for the cleanup */
  const everyWorker = []
  let finishing = false
  try {
    // The inbox's server and the application database.
    let inboxUrl
    let effectsUrl
    /** @type {{ kill: () => Promise<void>, start: () => Promise<void> }} the inbox's server */
    let server
    if (engine === 'postgres') {
      const pg = await startPostgresServer({ fsync: true, maxConnections: 200 })
      cleanups.push(() => pg.stop())
      server = pg
      inboxUrl = effectsUrl = pg.url
      const setup = await connectPostgres(pg.url, 2)
      const { PostgresInbox } = await import('svc-webhooks/postgres')
      await new PostgresInbox({ pool: setup }).ensureTable()
      await postgresEffects(setup).setup()
      await setup.end()
    } else {
      const inboxRedis = await startRedisServer({ persist: true })
      cleanups.push(() => inboxRedis.stop())
      server = inboxRedis
      const app = await startRedisServer({ persist: true })
      cleanups.push(() => app.stop())
      inboxUrl = inboxRedis.url
      effectsUrl = app.url
    }
    const effects = engine === 'postgres' ? postgresEffects(await connectPostgres(effectsUrl, 2)) : redisEffects((await connectRedis(effectsUrl)).client)
    cleanups.push(() => effects.close())
    // The parent's own view of the inbox: stats only, to know when it has drained.
    const watcher = await openInbox({ engine, url: inboxUrl })
    cleanups.push(() => watcher.close())

    const receiverClients = engine === 'postgres' ? clients.map(() => 'pg') : clients
    receiverClients.forEach((client, index) => {
      receiverChildren.push(
        startChild({
          name: `receiver ${index}`,
          script: join(here, 'receiver.mjs'),
          env: { SOAK_ENGINE: engine, SOAK_INBOX_URL: inboxUrl, SOAK_CLIENT: client, SOAK_SECRET: SECRET },
        }),
      )
    })
    const poisonIndex = poison ? Math.floor(count * 0.3) : -1
    let workerSeq = 0
    let crashes = 0
    /** @type {Set<import('./processes.mjs').SoakChild>} children the harness itself ends */
    const ended = new Set()
    /** @type {Set<number>} pids of workers that crashed on their own */
    const crashedPids = new Set()
    /** @type {Promise<unknown>[]} */
    const respawns = []
    /**
     * A supervisor's restart: a worker that exits on its own (the poison took it down) is
     * started again in its slot `respawnMs` later, at most 20 times in a run.
     *
     * @param {import('./processes.mjs').SoakChild} child
     */
    const supervise = (child) => {
      child.exited.then(() => {
        if (finishing || ended.has(child) || crashes >= 20) return
        crashes++
        if (child.pid !== undefined) crashedPids.add(child.pid)
        const slot = workerChildren.indexOf(child)
        if (slot < 0 || slot >= workers) return
        log(`inbox soak: ${child.name} (pid ${child.pid}) crashed, a new one in ${respawnMs} ms`)
        respawns.push(
          sleep(respawnMs).then(() => {
            if (finishing) return
            workerChildren.push(child) // kept for the record; its slot gets the new one
            workerChildren[slot] = startWorker()
          }),
        )
      })
      return child
    }
    const startWorker = () => {
      const child = startChild({
        name: `worker ${workerSeq++}`,
        script: join(here, 'worker.mjs'),
        env: {
          SOAK_ENGINE: engine,
          SOAK_INBOX_URL: inboxUrl,
          // The workers alternate clients too, so both are killed holding leases.
          SOAK_CLIENT: clients[workerSeq % clients.length] ?? 'ioredis',
          SOAK_EFFECTS_URL: effectsUrl,
          SOAK_FAIL_RATE: String(failRate),
          SOAK_CONCURRENCY: String(workerConcurrency),
          SOAK_VISIBILITY_MS: String(visibilityMs),
          SOAK_GUARD: guard ? '1' : '0',
          SOAK_HANG_RATE: String(hangRate),
          SOAK_HANDLER_TIMEOUT_MS: String(handlerTimeoutMs),
          SOAK_POISON_INDEX: String(poisonIndex),
          SOAK_MAX_STALLED: String(maxStalledCount),
        },
      })
      everyWorker.push(child)
      return supervise(child)
    }
    for (let i = 0; i < workers; i++) workerChildren.push(startWorker())
    const urls = await Promise.all(receiverChildren.map((r) => r.ready.then((port) => `http://127.0.0.1:${port}/`)))
    await Promise.all(workerChildren.map((w) => w.ready))
    log(`inbox soak (${engine}): ${count} deliveries to ${urls.length} receivers, ${workers} workers, inbox on ${inboxUrl.replace(/^postgres:\/\/[^@]*@/, 'postgres://')}`)

    // Faults, each due once the sender has delivered a share of the deliveries.
    /** @type {Set<number>} pids killed with SIGKILL */
    const killedPids = new Set()
    /** @type {Promise<unknown>[]} */
    const faults = []
    /** @type {{ at: number, run: () => Promise<unknown> }[]} */
    const schedule = []
    for (let k = 0; k < kills; k++) {
      // Spread between 15 % and 85 % of the run, round robin over the worker slots.
      const at = kills === 1 ? 0.5 : 0.15 + (0.7 * k) / (kills - 1)
      const slot = k % workers
      schedule.push({
        at,
        async run() {
          const victim = /** @type {import('./processes.mjs').SoakChild} */ (workerChildren[slot])
          if (victim.pid !== undefined) killedPids.add(victim.pid)
          ended.add(victim)
          log(`inbox soak: SIGKILL ${victim.name} (pid ${victim.pid}), a new one in ${respawnMs} ms`)
          await victim.kill()
          await sleep(respawnMs)
          workerChildren.push(victim) // kept for the record; its slot gets the new one
          // A worker started while the inbox's server restarts may fail to connect: start another.
          for (let attempt = 1; ; attempt++) {
            const next = startWorker()
            workerChildren[slot] = next
            try {
              await next.ready
              return
            } catch (error) {
              if (attempt >= 10) throw error
              await sleep(500)
            }
          }
        },
      })
    }
    let restarted = false
    let unreachableMs = 0
    if (restartAt !== undefined) {
      schedule.push({
        at: restartAt,
        async run() {
          log(`inbox soak: killing the inbox's ${engine === 'postgres' ? 'Postgres (immediate shutdown)' : 'Redis'}, starting it again ${downMs} ms later`)
          restarted = true
          const killedAt = Date.now()
          await server.kill()
          await sleep(downMs)
          await server.start()
          unreachableMs = Date.now() - killedAt
        },
      })
    }
    let outageRan = false
    let sentDuringOutage = 0
    let progress = 0
    if (outageMs > 0) {
      schedule.push({
        at: outageAt,
        async run() {
          log(`inbox soak: downstream outage for ${outageMs} ms (every handler write refused)`)
          outageRan = true
          await persist(() => effects.setDown(true))
          const from = progress
          await sleep(outageMs)
          sentDuringOutage = progress - from
          await persist(() => effects.setDown(false))
        },
      })
    }
    schedule.sort((a, b) => a.at - b.at)

    const { figures, ids, delivered } = await simulateSender({
      urls,
      secret: SECRET,
      count,
      concurrency,
      duplicateRate,
      disableAfter: 20,
      onProgress(done) {
        progress = done
        while (schedule.length > 0 && done >= Math.floor(count * /** @type {{ at: number }} */ (schedule[0]).at)) {
          faults.push(/** @type {{ run: () => Promise<unknown> }} */ (schedule.shift()).run())
        }
      },
    })
    await Promise.all(faults)
    if (outageRan === false && outageMs > 0) log('inbox soak: the outage never started (the sender stopped early)')

    // Wait (bounded) until every accepted delivery has left the inbox.
    const drainStart = Date.now()
    let drained = false
    for (let i = 0; i < 10_000 && Date.now() - drainStart < drainTimeoutMs; i++) {
      const stats = await watcher.inbox.stats().catch(() => undefined)
      if (stats && stats.depth === 0) {
        drained = true
        break
      }
      await sleep(100)
    }
    const drainMs = Date.now() - drainStart
    const inboxAtEnd = await watcher.inbox.stats().catch((/** @type {Error} */ error) => ({ error: error.message }))

    finishing = true
    await Promise.all(respawns)
    const deadLetters = await watcher.inbox.dead(1000).catch(() => [])
    const workerStats = await Promise.all(everyWorker.filter((w) => w.alive()).map((w) => w.stop()))
    const receiverStats = await Promise.all(receiverChildren.map((r) => r.stop()))

    // The verdict, from the application database.
    const { effects: applied, log: runs } = await effects.read()
    /** @type {Map<string, number[]>} pids of the successful runs of each id, in order */
    const okRuns = new Map()
    let failuresInjected = 0
    let refusedByOutage = 0
    let streak = 0
    let longestFailingStreak = 0
    let hungRuns = 0
    for (const row of runs) {
      if (row.kind === 'hang') {
        hungRuns++
        continue
      }
      if (row.kind === 'ok') {
        okRuns.set(row.id, [...(okRuns.get(row.id) ?? []), row.pid])
        streak = 0
        continue
      }
      if (row.kind === 'fail') failuresInjected++
      else refusedByOutage++
      // What a receiver running the handler in the request would have answered 5xx in a row.
      streak++
      if (streak > longestFailingStreak) longestFailingStreak = streak
    }
    /** @type {string[]} */
    const rerunAfterKill = []
    /** @type {string[]} */
    const rerunOther = []
    for (const [id, pids] of okRuns) {
      if (pids.length < 2) continue
      // A re-run is explained by a kill (or a crash) when a run before the last one was on a worker that died.
      if (pids.slice(0, -1).some((pid) => killedPids.has(pid) || crashedPids.has(pid))) rerunAfterKill.push(id)
      else rerunOther.push(id)
    }
    const known = new Set(ids)
    const poisonId = poisonIndex >= 0 ? ids[poisonIndex] : undefined
    return {
      ...figures,
      engine,
      restarted,
      unreachableMs,
      outageMs: outageRan ? outageMs : 0,
      sentDuringOutage,
      killed: killedPids.size,
      handlerRuns: runs.length,
      failuresInjected,
      hungRuns,
      refusedByOutage,
      longestFailingStreak,
      processed: [...applied.values()].reduce((a, b) => a + b, 0),
      lost: ids.filter((id) => !applied.has(id) && id !== poisonId),
      appliedTwice: ids.filter((id) => (applied.get(id) ?? 0) > 1),
      rerunAfterKill,
      rerunOther,
      unknown: [...applied.keys()].filter((id) => !known.has(id)),
      answered2xxButNotProcessed: [...delivered].filter((id) => !applied.has(id) && id !== poisonId),
      crashes,
      poisonId,
      poisonDead: poisonId !== undefined && deadLetters.some((letter) => letter.id === poisonId),
      poisonApplied: poisonId !== undefined && applied.has(poisonId),
      // Dead letters other than the poison: what buried them (never a body byte).
      otherDead: deadLetters
        .filter((letter) => letter.id !== poisonId)
        .map((letter) => ({ id: letter.id, attempts: letter.attempts, takes: letter.takes, lastError: letter.lastError, applied: applied.has(letter.id) })),
      maxStalledCount,
      drained,
      drainMs,
      inboxAtEnd,
      receivers: receiverStats,
      workerStats,
      totalMs: Date.now() - started,
    }
  } finally {
    finishing = true
    await Promise.allSettled([...everyWorker, ...receiverChildren].map((c) => c.kill()))
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined)
  }
}
