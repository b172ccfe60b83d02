#!/usr/bin/env node
// `npm run flow:run`: flow control across 3 worker processes, on a redis-server and a Postgres of
// its own on 127.0.0.1: the rate limit shared by the workers (handler starts per second over
// 20 s, against `perSecond`), then a pause from another process (handler starts while paused,
// the receiver's answers meanwhile, every delivery run after resume()). Exits 1 when the rate is
// more than 10 % off or the pause leaks.
//   --engines redis,postgres  --per-second 50  --seconds 20
// test/inbox/flow-processes.test.ts runs the same harness over 4 s.
import { parseArgs } from 'node:util'
import { startRedisServer } from '../tools/redis.mjs'
import { startPostgresServer } from '../tools/postgres.mjs'
import { measureRate, runPause } from '../tools/order/flow.mjs'

const { values } = parseArgs({ options: { engines: { type: 'string', default: 'redis,postgres' }, 'per-second': { type: 'string', default: '50' }, seconds: { type: 'string', default: '20' } } })
let failed = false
for (const engine of /** @type {('redis' | 'postgres')[]} */ (values.engines.split(','))) {
  const server = engine === 'redis' ? await startRedisServer() : await startPostgresServer()
  try {
    const perSecond = Number(values['per-second'])
    const rate = await measureRate({ engine, url: server.url, perSecond, seconds: Number(values.seconds) })
    const off = Math.abs(rate.measured - perSecond) / perSecond
    console.log(`${engine}: rateLimit ${perSecond}/s across 3 workers (${rate.workersStarting} starting): measured ${rate.measured.toFixed(2)}/s over ${rate.seconds} s, ${(off * 100).toFixed(1)} % off${off > 0.1 ? ' (FAILED: over 10 %)' : ''}`)
    const pause = await runPause({ engine, url: server.url })
    const pauseOk = pause.startsWhilePaused === 0 && pause.statuses.every((s) => s === 202) && pause.missing === 0
    console.log(`${engine}: pause: ${pause.startsWhilePaused} handler starts while paused, receiver answered ${[...new Set(pause.statuses)].join('/')} to ${pause.statuses.length} deliveries meanwhile, ${pause.missing} not run after resume()${pauseOk ? '' : ' (FAILED)'}`)
    failed ||= off > 0.1 || !pauseOk
  } finally {
    await server.stop()
  }
}
process.exit(failed ? 1 : 0)
