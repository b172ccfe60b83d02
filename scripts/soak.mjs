#!/usr/bin/env node
// `npm run soak`: the large soak. Flags: --count N (default 100000), --concurrency N (default 64),
// --fail-rate R (0.1), --duplicates R (0.3), --restart-at R (share of deliveries done when Redis
// is killed, 0.4), --down-ms N (how long it stays down, 2500), --clients a,b,c
// (ioredis | node-redis, one receiver process each; default ioredis,node-redis,ioredis).
// Prints the figures and exits 1 when a delivery was lost, doubled or refused permanently.
// The same harness as test/soak.test.ts, which runs it at 1,500 deliveries.
import { parseArgs } from 'node:util'
import { findRedisServer } from '../test/support/redis-process.mjs'
import { runSoak } from '../test/support/soak/harness.mjs'

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '100000' },
    concurrency: { type: 'string', default: '64' },
    'fail-rate': { type: 'string', default: '0.1' },
    duplicates: { type: 'string', default: '0.3' },
    'restart-at': { type: 'string', default: '0.4' },
    'down-ms': { type: 'string', default: '2500' },
    clients: { type: 'string', default: 'ioredis,node-redis,ioredis' },
  },
})

if (!findRedisServer()) {
  console.error('soak: redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN).')
  process.exit(2)
}

const f = await runSoak({
  count: Number(values.count),
  concurrency: Number(values.concurrency),
  failRate: Number(values['fail-rate']),
  duplicateRate: Number(values.duplicates),
  restartAt: Number(values['restart-at']),
  downMs: Number(values['down-ms']),
  clients: values.clients.split(','),
  log: (line) => console.error(line),
})

const rows = [
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
]
for (const [name, value] of rows) console.log(`${name.padEnd(38)} ${value}`)
for (const r of f.receivers) console.log(`receiver (${r.client})`.padEnd(38), JSON.stringify(r.outcomes), `complete failures: ${r.completeFailures}`)

const failed = f.lost.length + f.doubled.length + f.permanent.length + f.unknown.length + f.answered2xxButNotProcessed.length
process.exit(failed === 0 ? 0 : 1)
