#!/usr/bin/env node
// `npm run outage`: the outage experiment. An Express receiver as the README sets it up, the
// sender simulator at 20 deliveries/s for 40 s (spec/service-api.md §6.3: 10 s to answer, 5xx
// and 429 retried with backoff, other 4xx dropped, the endpoint disabled after 20 consecutive
// failures), the handler's database down for 15 s of it and every 50th handler taking 12 s; run
// (a) with the handler in the request and (b) with `inbox: new RedisInbox(...)` and a worker in the
// same process; `--only bullmq,pg-boss` (or any list of the four) runs the same story with
// `inbox: new BullMQInbox(...)` and a BullMQ Worker, and with `inbox: new PgBossInbox(...)` and
// `boss.work`. Prints one table.
//   --scale S (time scale, default 1: about 100 s in all; 0.25 runs four times faster),
//   --rate N (20), --duration S (40), --outage-at S (10), --outage S (15), --slow-every N (50),
//   --slow S (12), --worker-concurrency N (16), --only handler,inbox,bullmq,pg-boss
//   (default handler,inbox), --json.
// Exits 1 when an inbox side lost a delivery, ran one twice, let the sender see 20 consecutive
// failures or did not finish in time. test/soak/soak.test.ts runs it at --scale 0.2, and
// test/engines/outage.test.ts the engines.
import { parseArgs } from 'node:util'
import { postgresSkipReason } from '../tools/postgres.mjs'
import { findRedisServer } from '../tools/redis.mjs'
import { outageProblems, runOutage } from '../tools/soak/outage.mjs'

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '1' },
    rate: { type: 'string', default: '20' },
    duration: { type: 'string', default: '40' },
    'outage-at': { type: 'string', default: '10' },
    outage: { type: 'string', default: '15' },
    'slow-every': { type: 'string', default: '50' },
    slow: { type: 'string', default: '12' },
    'worker-concurrency': { type: 'string', default: '16' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
})

const MODES = ['handler', 'inbox', 'bullmq', 'pg-boss']
const modes = (values.only ?? 'handler,inbox').split(',')
if (!modes.every((mode) => MODES.includes(mode))) {
  console.error(`outage: --only takes a list of ${MODES.join(', ')}, not "${values.only}".`)
  process.exit(2)
}
if ((modes.includes('inbox') || modes.includes('bullmq')) && !findRedisServer()) {
  console.error('outage: redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN).')
  process.exit(2)
}
const noPostgres = modes.includes('pg-boss') ? postgresSkipReason() : undefined
if (noPostgres) {
  console.error(`outage: ${noPostgres}`)
  process.exit(2)
}

const options = {
  scale: Number(values.scale),
  rate: Number(values.rate),
  durationS: Number(values.duration),
  outageAtS: Number(values['outage-at']),
  outageS: Number(values.outage),
  slowEvery: Number(values['slow-every']),
  slowS: Number(values.slow),
  workerConcurrency: Number(values['worker-concurrency']),
  log: (/** @type {string} */ line) => console.error(line.length > 200 ? `${line.slice(0, 200)}...` : line),
}

const title = { handler: '(a) handler in the request', inbox: '(b) inbox + worker', bullmq: 'BullMQ queue + Worker', 'pg-boss': 'pg-boss queue + work()' }
/** @type {import('../tools/soak/outage.mjs').OutageFigures[]} */
const runs = []
for (const mode of modes) runs.push(await runOutage({ ...options, mode: /** @type {import('../tools/soak/outage.mjs').OutageMode} */ (mode) }))

if (values.json) {
  console.log(JSON.stringify(runs, null, 2))
} else {
  const { rate, durationS, outageAtS, outageS, slowEvery, slowS, scale } = options
  console.log(
    `\n${Math.round(rate * durationS)} deliveries at ${rate}/s for ${durationS} s; database down from ${outageAtS} s to ${outageAtS + outageS} s; ` +
      `every ${slowEvery}th handler takes ${slowS} s; sender: 10 s timeout, disabled after 20 consecutive failures` +
      `${scale === 1 ? '' : `; time x${scale} (figures in unscaled seconds; the sender's 10 s timeout stays 10 s)`}\n`,
  )
  /** @type {[string, (f: import('../tools/soak/outage.mjs').OutageFigures) => string | number][]} */
  const rows = [
    ['deliveries', (f) => f.deliveries],
    ['answered 2xx', (f) => f.delivered],
    ['answers by status', (f) => Object.entries(f.statuses).map(([status, n]) => `${status}: ${n}`).join(', ')],
    ['most consecutive failures seen', (f) => `${f.maxConsecutiveFailures}${f.failedAfterDisabled ? ` (${f.failedAfterDisabled} of them in flight when disabled)` : ''}`],
    ['endpoint disabled', (f) => (f.disabled ? `yes, at ${f.disabledAtS?.toFixed(1)} s` : 'no')],
    ['never delivered', (f) => `${f.neverDelivered}${f.notSent ? ` (${f.notSent} never sent)` : ''}`],
    ['lost (handler never succeeded)', (f) => f.lost],
    ['run twice', (f) => f.runTwice],
    ['handler runs / failed', (f) => `${f.handlerRuns} / ${f.handlerFailures}`],
    ['sender timeouts', (f) => f.timeouts],
    ['all handled, after the last send', (f) => (f.drained ? `${f.drainS} s` : `not within the limit (${f.drainS} s)`)],
    ['wall time', (f) => `${(f.elapsedMs / 1000).toFixed(1)} s`],
  ]
  const width = 34
  const cells = rows.map(([name, cell]) => [name, ...runs.map((f) => String(cell(f)))])
  const column = Math.max(...cells.flatMap((row) => row.slice(1).map((text) => text.length + 3)), 30)
  console.log(''.padEnd(width) + runs.map((f) => title[f.mode].padEnd(column)).join('').trimEnd())
  for (const [name, ...values] of cells) console.log((name ?? '').padEnd(width) + values.map((text) => text.padEnd(column)).join('').trimEnd())
}

let failed = false
for (const figures of runs.filter((f) => f.mode !== 'handler')) {
  const problems = outageProblems(figures)
  if (problems.length === 0) continue
  failed = true
  console.error(`\noutage: the ${title[figures.mode]} side FAILED: ${problems.join(', ')}`)
}
process.exit(failed ? 1 : 0)
