#!/usr/bin/env node
// `npm run soak`: the large soaks. Two modes.
//
// Handler in the request (default): receivers with RedisStore, Redis killed mid-run.
//   --count N (default 100000), --concurrency N (64), --fail-rate R (0.1), --duplicates R (0.3),
//   --restart-at R (share of deliveries done when Redis is killed, 0.4), --down-ms N (how long it
//   stays down, 2500), --clients a,b,c (ioredis | node-redis, one receiver process each; default
//   ioredis,node-redis,ioredis).
//
// Durable inbox (--inbox redis | postgres): receivers append to RedisInbox or PostgresInbox, worker
// processes run an idempotent handler; duplicates, handler failures, a downstream outage, workers
// killed with SIGKILL and restarted, and (Redis) the inbox's Redis restarted.
//   --count N (redis 40000, postgres 6000), --concurrency N (32), --fail-rate R (0.1),
//   --duplicates R (0.3), --workers N (3), --worker-concurrency N (8), --kills N (redis 10,
//   postgres 5), --outage-ms N (3000), --restart-at R (0.45; redis only), --down-ms N (200),
//   --clients a,b (ioredis,node-redis), --quick (3,000 deliveries, 3 kills, a 1.5 s outage: the
//   size the test suite runs, under ~30 s), --unguarded (the handler is not idempotent: shows the
//   effects a re-run after a kill applies twice, so the run fails), --hang-rate R (share of handler
//   runs that never settle, freed by the workers' handlerTimeoutMs; 0.003), --poison (one delivery
//   crashes every worker that runs it: dead-lettered within maxStalledCount + 1 crashes; on by
//   default where the engines count hand-outs at take), --no-poison.
//
// Prints the figures and exits 1 when a delivery was lost or doubled (and in inbox mode, when the
// sender saw 20 consecutive failures). test/soak/soak.test.ts runs the same harnesses, smaller.
import { parseArgs } from 'node:util'
import { findRedisServer } from '../tools/redis.mjs'
import { runSoak } from '../tools/soak/harness.mjs'
import { inboxSoakProblems, QUICK_INBOX_SOAK, runInboxSoak } from '../tools/soak/inbox-soak.mjs'
import { findPostgresBinDir } from '../tools/postgres.mjs'

const { values } = parseArgs({
  options: {
    inbox: { type: 'string' },
    quick: { type: 'boolean', default: false },
    count: { type: 'string' },
    concurrency: { type: 'string' },
    'fail-rate': { type: 'string', default: '0.1' },
    duplicates: { type: 'string', default: '0.3' },
    'restart-at': { type: 'string' },
    'down-ms': { type: 'string' },
    clients: { type: 'string' },
    workers: { type: 'string', default: '3' },
    'worker-concurrency': { type: 'string', default: '8' },
    kills: { type: 'string' },
    'outage-ms': { type: 'string' },
    unguarded: { type: 'boolean', default: false },
    'hang-rate': { type: 'string', default: '0.003' },
    poison: { type: 'boolean', default: true },
    'no-poison': { type: 'boolean', default: false },
  },
})

/** @param {string | undefined} value @param {number} fallback */
const num = (value, fallback) => (value === undefined ? fallback : Number(value))
/** @param {[string, unknown][]} rows */
const print = (rows) => {
  for (const [name, value] of rows) console.log(`${name.padEnd(42)} ${value}`)
}

const engine = values.inbox
if (engine !== undefined && engine !== 'redis' && engine !== 'postgres') {
  console.error(`soak: --inbox must be redis or postgres, not "${engine}".`)
  process.exit(2)
}
if ((engine === undefined || engine === 'redis') && !findRedisServer()) {
  console.error('soak: redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN).')
  process.exit(2)
}
if (engine === 'postgres' && !findPostgresBinDir()) {
  console.error('soak: no Postgres binaries found (initdb, pg_ctl): install postgresql, or set PG_BIN_DIR.')
  process.exit(2)
}

if (engine === undefined) {
  const f = await runSoak({
    count: num(values.count, 100_000),
    concurrency: num(values.concurrency, 64),
    failRate: Number(values['fail-rate']),
    duplicateRate: Number(values.duplicates),
    restartAt: num(values['restart-at'], 0.4),
    downMs: num(values['down-ms'], 2500),
    clients: (values.clients ?? 'ioredis,node-redis,ioredis').split(','),
    log: (line) => console.error(line),
  })
  print([
    ['deliveries', f.deliveries],
    ['duplicates sent', `${f.duplicatesSent} (${f.concurrentResends} concurrent, ${f.laterResends} later resends)`],
    ['failures injected', f.failuresInjected],
    ['attempts (HTTP requests)', `${f.attempts} (${f.retries} retries)`],
    ['answers by status', JSON.stringify(f.statuses)],
    ['timeouts / network errors', `${f.timeouts} / ${f.networkErrors}`],
    ['Redis killed and restarted', f.redisRestarted ? `yes, once (down ${f.downMs} ms)` : 'no'],
    ['processed (handler successes)', f.processed],
    ['lost', f.lost.length],
    ['doubled', f.doubled.length],
    ['permanent 4xx to a valid delivery', f.permanent.length],
    ['gave up (attempts exhausted)', f.gaveUp.length],
    ['2xx answered but not processed', f.answered2xxButNotProcessed.length],
    ['max consecutive failed attempts', f.maxConsecutiveFailures],
    ['latency per attempt p50 / p99 / max', `${f.latencyMs.p50} / ${f.latencyMs.p99} / ${f.latencyMs.max} ms`],
    ['elapsed', `${(f.elapsedMs / 1000).toFixed(1)} s (${Math.round((f.deliveries / f.elapsedMs) * 1000)} deliveries/s)`],
  ])
  for (const r of f.receivers) console.log(`receiver (${r.client})`.padEnd(42), JSON.stringify(r.outcomes), `complete failures: ${r.completeFailures}`)
  const failed = f.lost.length + f.doubled.length + f.permanent.length + f.unknown.length + f.answered2xxButNotProcessed.length
  process.exit(failed === 0 ? 0 : 1)
}

const sized = values.quick ? QUICK_INBOX_SOAK : engine === 'postgres' ? { count: 6000, kills: 5 } : { count: 40_000, kills: 10 }
const f = await runInboxSoak({
  engine,
  ...sized,
  ...(values.count !== undefined ? { count: Number(values.count) } : {}),
  ...(values.kills !== undefined ? { kills: Number(values.kills) } : {}),
  ...(values['outage-ms'] !== undefined ? { outageMs: Number(values['outage-ms']) } : values.quick ? {} : { outageMs: 3000 }),
  concurrency: num(values.concurrency, 32),
  failRate: Number(values['fail-rate']),
  duplicateRate: Number(values.duplicates),
  workers: Number(values.workers),
  workerConcurrency: Number(values['worker-concurrency']),
  restartAt: num(values['restart-at'], 0.45),
  downMs: num(values['down-ms'], 200),
  clients: (values.clients ?? 'ioredis,node-redis').split(','),
  guard: !values.unguarded,
  hangRate: Number(values['hang-rate']),
  poison: values.poison && !values['no-poison'],
  log: (line) => console.error(line),
})
const problems = inboxSoakProblems(f)
print([
  [`inbox soak on ${engine}`, problems.length === 0 ? 'PASS' : `FAIL: ${problems.join(', ')}`],
  ['deliveries', f.deliveries],
  ['duplicates sent', `${f.duplicatesSent} (${f.concurrentResends} concurrent, ${f.laterResends} later resends)`],
  ['attempts (HTTP requests)', `${f.attempts} (${f.retries} retries)`],
  ['answers by status', JSON.stringify(f.statuses)],
  ['timeouts / network errors', `${f.timeouts} / ${f.networkErrors}`],
  ['most consecutive failures (sender)', `${f.maxConsecutiveFailures} (disabled at 20: ${f.disabled ? 'yes' : 'no'})`],
  ['workers killed with SIGKILL (and restarted)', f.killed],
  [`inbox's ${engine === 'postgres' ? 'Postgres' : 'Redis'} killed and restarted`, f.restarted ? `yes, once (unreachable for ${f.unreachableMs} ms)` : 'no'],
  ['downstream outage', f.outageMs ? `${f.outageMs} ms: ${f.sentDuringOutage} deliveries sent meanwhile, ${f.refusedByOutage} handler runs refused` : 'none'],
  ['longest run of failing handler runs', `${f.longestFailingStreak} (a receiver answering 5xx for them: disabled at 20)`],
  ['handler runs / injected failures', `${f.handlerRuns} / ${f.failuresInjected}`],
  ['hung handler runs (freed by the deadline)', f.hungRuns],
  ['poison delivery', f.poisonId === undefined ? 'none' : `${f.poisonDead ? 'dead-lettered' : 'NOT dead-lettered'} after ${f.crashes} worker crashes (at most ${f.maxStalledCount + 1})`],
  ['effects applied (deliveries processed)', f.processed],
  ['lost', f.lost.length],
  [`run twice (effect applied twice${values.unguarded ? ', no guard' : ''})`, f.appliedTwice.length],
  [`handler re-run after a kill${values.unguarded ? '' : ' (guard held)'}`, f.rerunAfterKill.length],
  [`handler re-run otherwise${values.unguarded ? '' : ' (guard held)'}`, f.rerunOther.length],
  ['permanent 4xx / gave up', `${f.permanent.length} / ${f.gaveUp.length}`],
  ['2xx answered but not processed', f.answered2xxButNotProcessed.length],
  ['inbox at the end', JSON.stringify(f.inboxAtEnd)],
  ['dead letters besides the poison', JSON.stringify(f.otherDead)],
  ['latency per attempt p50 / p99 / max', `${f.latencyMs.p50} / ${f.latencyMs.p99} / ${f.latencyMs.max} ms`],
  ['sending / draining / total', `${(f.elapsedMs / 1000).toFixed(1)} s / ${(f.drainMs / 1000).toFixed(1)} s / ${(f.totalMs / 1000).toFixed(1)} s`],
])
for (const r of f.receivers) console.log(`receiver (${r.client})`.padEnd(42), JSON.stringify(r.outcomes))
for (const w of f.workerStats) console.log(`worker (pid ${w.pid})`.padEnd(42), JSON.stringify(w.outcomes), `inbox errors: ${w.inboxErrors}`)
process.exit(problems.length === 0 ? 0 : 1)
