#!/usr/bin/env node
// `npm run order:run`: order within a conversation across worker processes, at full size: 100
// conversations × 20 messages appended shuffled, 3 worker processes, 10 % handler failures, 5
// deliveries that always fail (dead-lettered), one worker killed with SIGKILL mid-run; on Redis
// then Postgres, each on a private server on 127.0.0.1. Prints the figures and the rules broken;
// exits 1 when any rule broke or a delivery was lost or succeeded twice.
//   --engines redis,postgres  --conversations 100  --messages 20  --workers 3  --fail-rate 0.1
// test/inbox/ordering-processes.test.ts runs the same harness and size with a 4 s retry budget.
import { parseArgs } from 'node:util'
import { startRedisServer } from '../tools/redis.mjs'
import { startPostgresServer } from '../tools/postgres.mjs'
import { runOrderedProcesses } from '../tools/order/run.mjs'

const { values } = parseArgs({
  options: {
    engines: { type: 'string', default: 'redis,postgres' },
    conversations: { type: 'string', default: '100' },
    messages: { type: 'string', default: '20' },
    workers: { type: 'string', default: '3' },
    'fail-rate': { type: 'string', default: '0.1' },
  },
})
let failed = false
for (const engine of /** @type {('redis' | 'postgres')[]} */ (values.engines.split(','))) {
  const server = engine === 'redis' ? await startRedisServer() : await startPostgresServer()
  try {
    const result = await runOrderedProcesses({
      engine,
      url: server.url,
      conversations: Number(values.conversations),
      messages: Number(values.messages),
      workers: Number(values.workers),
      failRate: Number(values['fail-rate']),
      poison: 5,
      kill: true,
      timeoutMs: 300_000,
      // Long enough that a delivery waiting behind its conversation is not dead of age at its first failure.
      maxRetryAgeMs: 20_000,
    })
    console.log(`${engine}: ${JSON.stringify(result.figures)}`)
    for (const line of result.problems) console.log(`  broken: ${line}`)
    const bad = !result.finished || result.problems.length > 0 || result.figures.lost > 0 || result.figures.twice > 0 || !result.figures.deadReleasedKeys
    console.log(`${engine}: ${bad ? 'FAILED' : 'ok'}: per conversation in created_at order, never overlapping, ${result.figures.lost} lost, ${result.figures.twice} twice, ${result.figures.dead} dead letters (${result.figures.poisonedDead} of ${result.figures.poisoned} poisoned), ${result.figures.rerunAfterKill} re-run after the kill`)
    failed ||= bad
  } finally {
    await server.stop()
  }
}
process.exit(failed ? 1 : 0)
