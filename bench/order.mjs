/**
 * `npm run bench:order`: what order within a conversation costs (DESIGN.md "Order within a
 * conversation"), in one run, side by side, on a redis-server and a Postgres of its own on
 * 127.0.0.1. Each row: 3 worker processes (concurrency 10 each, a handler that waits 5 ms, as
 * one that calls a model or a database does) draining a backlog of message.received deliveries
 * accepted in a shuffled order while the workers were paused, once with `ordering: byConversation`
 * and once without, no failures. Figures are deliveries per second from resume() until the inbox
 * is empty (placing every delivery under its key is part of the ordered figure). The ordered row
 * is the inbox given the ordering (`new RedisInbox({ client, ordering: byConversation })`: each
 * append files its delivery, the take places it); the line under it, the ordering given to the
 * workers only, which place every delivery themselves. On Postgres the tables are analyzed once
 * the backlog is in, as autovacuum does once a tenth of a table changed: the workers run on plans
 * made from a backlog's statistics, as in production after a pause, not on a new table's guesses.
 *
 * - many conversations: 200 conversations × 25 messages. Target: ordered ≥ 90 % of unordered.
 *   With a 5 ms handler both runs are bound by CPU (placing each delivery under its key costs a
 *   parse and a script); the row with a 50 ms handler shows the cost where handlers dominate.
 * - one hot conversation: 1 conversation × 300 messages. Ordered, one message runs at a time
 *   whatever the concurrency: its rate is about 1 / (handler time + a take and an ack), the
 *   ceiling of a single conversation, and the price of the order it asked for.
 *
 * Under each row, the CPU per delivery of the worker processes and the engine's server together
 * (Linux: read from /proc; for Postgres the postmaster with its backends): the machine is shared, so throughput moves with what else runs, and
 * the CPU ratio says what ordering costs where every core is busy. Then the median time from
 * resume() to the first handler start: ordered, every delivery of the backlog is placed first.
 *
 * On Postgres each worker process has a pool of 2 connections (`--pool`): six for the three, on a
 * 2-core machine that also runs the workers, three per core (docs/inbox.md, "Sizing the pool",
 * advises two to four per database core). The row under the first runs the same shape with 10
 * connections per worker (30, one per handler slot), to show what an oversized pool costs: both
 * paths lose throughput to the backends' contention, the ordered one about twice as much.
 *
 *   node bench/order.mjs [--engines redis,postgres] [--rounds 3] [--pool 2]
 *
 * Each shape runs `--rounds` times, the three runs of a round in an order that rotates, and each
 * figure is the median over rounds of (ordered / unordered) measured in the same round, with
 * the range beside it: one run of each moves by tens of points with what else uses the machine.
 */
import { parseArgs } from 'node:util'
import { startRedisServer } from '../tools/redis.mjs'
import { startPostgresServer } from '../tools/postgres.mjs'
import { cpuMsOf, runOrderedProcesses } from '../tools/order/run.mjs'

const { values } = parseArgs({ options: { engines: { type: 'string', default: 'redis,postgres' }, rounds: { type: 'string', default: '3' }, pool: { type: 'string', default: '2' } } })
const rounds = Math.max(1, Number(values.rounds))
const pool = Math.max(1, Number(values.pool))
/** Worker processes per run. */
const WORKERS = 3
const shapes = [
  { name: 'many conversations (200 × 25)', conversations: 200, messages: 25, handlerMs: 5 },
  { name: '  the same, 10 connections per worker', conversations: 200, messages: 25, handlerMs: 5, connections: 10, only: 'postgres' },
  { name: '  the same, a 50 ms handler (200 × 10)', conversations: 200, messages: 10, handlerMs: 50 },
  { name: 'one hot conversation (1 × 300)', conversations: 1, messages: 300, handlerMs: 5 },
]
const median = (list) => [...list].sort((a, b) => a - b)[(list.length - 1) >> 1]
const percent = (list) => `${(median(list) * 100).toFixed(0)} %${list.length > 1 ? ` (${(Math.min(...list) * 100).toFixed(0)}–${(Math.max(...list) * 100).toFixed(0)})` : ''}`
if (values.engines.includes('postgres')) console.log(`Postgres: ${pool} connections per worker process (--pool), ${WORKERS * pool} for the ${WORKERS}`)
console.log(`engine    shape                                    unordered/s  ordered/s  ordered vs unordered, median of ${rounds}`)
for (const engine of values.engines.split(',')) {
  const server = engine === 'redis' ? await startRedisServer() : await startPostgresServer()
  try {
    for (const shape of shapes) {
      if (shape.only !== undefined && shape.only !== engine) continue
      const { conversations, messages, handlerMs } = shape
      // The CPU of the workers and of the engine's server: on a machine whose cores other work
      // also uses, throughput moves with that work; what a delivery costs in CPU does not.
      const run = async (variant) => {
        // Postgres: the postmaster with its backends (a process per connection).
        const cpu = () => cpuMsOf(server.pid, { children: engine === 'postgres' })
        const before = cpu()
        const result = await runOrderedProcesses({ engine, url: server.url, conversations, messages, workers: WORKERS, concurrency: 10, failRate: 0, poison: 0, kill: false, ordered: variant !== 'unordered', filed: variant === 'filed', handlerMs, timeoutMs: 300_000, prefill: true, analyze: true, connections: shape.connections ?? pool })
        const after = cpu()
        if (variant !== 'unordered' && result.problems.length > 0) console.log(`  ${variant} run broke the rules: ${result.problems[0]}`)
        const cpuMs = result.workerCpuMs !== undefined && before !== undefined && after !== undefined ? result.workerCpuMs + after - before : undefined
        return { perSecond: result.figures.perSecond, cpuPer: cpuMs === undefined ? undefined : cpuMs / result.figures.deliveries, firstStartMs: result.figures.firstStartMs }
      }
      // Each run on a fresh inbox: the table or keys of the one before are emptied by the time it ends.
      const variants = ['unordered', 'filed', 'placed']
      const measured = { unordered: [], filed: [], placed: [] }
      for (let round = 0; round < rounds; round++) {
        for (let i = 0; i < variants.length; i++) {
          const variant = variants[(i + round) % variants.length]
          measured[variant].push(await run(variant))
        }
      }
      const u = measured.unordered
      for (const [variant, label] of [['filed', ''], ['placed', '  placed by the workers (ordering on the worker only)']]) {
        const o = measured[variant]
        const ratios = o.map((r, i) => r.perSecond / u[i].perSecond)
        const target = label !== '' || shape.connections !== undefined ? '' : shape.conversations > 1 ? (median(ratios) >= 0.9 ? ' (target ≥ 90 %: met)' : ' (target ≥ 90 %: NOT met)') : ' (one at a time, by design)'
        console.log(`${(label ? '' : engine).padEnd(10)}${(label || shape.name).padEnd(41)}${String(label ? '' : median(u.map((r) => r.perSecond))).padStart(11)}${String(median(o.map((r) => r.perSecond))).padStart(11)}  ${percent(ratios)}${target}`)
        if (o.every((r) => r.cpuPer !== undefined) && u.every((r) => r.cpuPer !== undefined)) {
          const per = (list) => (median(list.map((r) => r.cpuPer)) * 1000).toFixed(0)
          console.log(`${''.padEnd(10)}${'  CPU µs per delivery (workers + server)'.padEnd(41)}${per(u).padStart(11)}${per(o).padStart(11)}  ${percent(o.map((r, i) => u[i].cpuPer / r.cpuPer))} (unordered CPU / ordered CPU)`)
        }
        // What the backlog's placing delays: every delivery is placed before the first head runs.
        if (o.every((r) => r.firstStartMs !== undefined) && u.every((r) => r.firstStartMs !== undefined)) {
          const first = (list) => `${median(list.map((r) => r.firstStartMs))} ms`
          console.log(`${''.padEnd(10)}${'  first handler start after resume()'.padEnd(41)}${first(u).padStart(11)}${first(o).padStart(11)}`)
        }
      }
    }
  } finally {
    await server.stop()
  }
}
