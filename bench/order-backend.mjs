/**
 * `node bench/order-backend.mjs`: the CPU one Postgres backend spends per delivery, ordered and
 * not, with nothing else on the connection: what `bench:order`'s CPU rows are made of on the
 * server side, without the workers and the scheduling noise of three processes.
 *
 * One connection (so one backend, read from /proc) on a Postgres of its own on 127.0.0.1 drains
 * 200 conversations × 25 messages appended in a shuffled order, after placing them (not counted):
 * - `unordered`: takes of 4 and a completion each;
 * - `ordered`: ordered takes of 4 (`takeOrdered`, the inbox given `byConversation`) and a
 *   completion each;
 * - `chained`: the same, each completion through `completeNext`, which hands out the key's next
 *   head (a take only when none came).
 *
 * With `--analyze`, the tables are analyzed once the backlog is placed, as autovacuum does once a
 * tenth of a table changed: the drain then runs on plans made from the statistics of a placed
 * backlog and a key table of 200 rows, as in production, not on a new table's guesses.
 *
 *   node bench/order-backend.mjs [--rounds 2] [--analyze]
 *
 * Linux only (the backend's CPU is read from /proc/<pid>/stat).
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { byConversation } from 'svc-webhooks'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { startPostgresServer } from '../tools/postgres.mjs'
import { messageBody } from '../tools/order/run.mjs'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2' }, analyze: { type: 'boolean', default: false } } })
const CONVERSATIONS = 200
const MESSAGES = 25
const filed = { placeLeaseMs: 5_000, poke: [], filed: { strict: true } }

/** CPU time of a process, ms. */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

async function drain(inbox, mode) {
  let deliveries = 0
  let takes = 0
  // Bounded: every take that brings something completes it all; one that brings nothing ends it.
  for (let guard = 0; guard < CONVERSATIONS * MESSAGES + 1; guard++) {
    const batch = mode === 'unordered' ? await inbox.take(4, 60_000) : (await inbox.takeOrdered(4, 60_000, filed)).run
    takes++
    if (batch.length === 0) break
    for (let i = 0; i < batch.length; i++) {
      deliveries++
      if (mode !== 'chained') await inbox.complete(batch[i])
      else {
        const { next } = await inbox.completeNext(batch[i], 60_000, true)
        if (next) batch.push(next)
      }
    }
  }
  return { deliveries, takes }
}

const server = await startPostgresServer()
const pool = new pg.Pool({ connectionString: server.url, max: 1 })
try {
  const pid = (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid
  let table = 0
  console.log('mode        deliveries  takes  backend CPU µs per delivery')
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const mode of ['unordered', 'ordered', 'chained']) {
      const inbox = new PostgresInbox({ pool, table: `bench_order_${++table}`, maintenanceIntervalMs: false, ...(mode !== 'unordered' && { ordering: byConversation }) })
      await inbox.ensureTable()
      const messages = []
      for (let c = 0; c < CONVERSATIONS; c++) for (let m = 0; m < MESSAGES; m++) messages.push([c, m])
      messages.sort(() => Math.random() - 0.5)
      for (const [c, m] of messages) {
        await inbox.append({ keys: [`k${c}-${m}`], endpoint: 'default', id: `e${c}-${m}`, timestamp: 1, signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(c, m), receivedAt: Date.now() })
      }
      // Placed before the count starts: the takes of an ordered inbox place at most a batch each.
      if (mode !== 'unordered') {
        for (let i = 0; i < 100; i++) {
          const taken = await inbox.takeOrdered(0, 60_000, filed)
          if (taken.place.length === 0 && !taken.more && !taken.busy) break
        }
      }
      if (values.analyze) await pool.query('ANALYZE')
      const before = cpuMs(pid)
      const { deliveries, takes } = await drain(inbox, mode)
      if (deliveries !== CONVERSATIONS * MESSAGES) throw new Error(`bench:order-backend: ${mode} ran ${deliveries} deliveries, not ${CONVERSATIONS * MESSAGES}`)
      console.log(`${mode.padEnd(12)}${String(deliveries).padStart(10)}${String(takes).padStart(7)}${String(Math.round((1000 * (cpuMs(pid) - before)) / deliveries)).padStart(29)}`)
      inbox.close()
    }
  }
} finally {
  await pool.end()
  await server.stop()
}
