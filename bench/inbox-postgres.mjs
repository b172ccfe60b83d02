/**
 * `node bench/inbox-postgres.mjs` (after `npm run build`): PostgresInbox throughput against a
 * throwaway Postgres it starts on 127.0.0.1 (initdb + pg_ctl into a temp dir, as the tests'
 * support does; run as the `postgres` user when this runs as root). Prints appends/s (one key:
 * one statement; two keys: one transaction), stats() latency at that depth, and worker
 * deliveries/s (3 workers x concurrency 8, no-op handler) until the inbox is empty.
 *
 * Bounded: SVC_BENCH_INBOX_N deliveries per append phase (default 5000), and the whole run is
 * stopped after 3 minutes. Durable by default (fsync on, synchronous_commit on: what a 202
 * promises); `--fsync=off` measures without the disk flush.
 */
import pg from 'pg'
import { createInboxWorker } from 'svc-webhooks'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { findPostgresBinDir, startPostgresServer } from '../tools/postgres.mjs'

const N = Number(process.env.SVC_BENCH_INBOX_N ?? 5000)
const SENDERS = 16
const WORKERS = 3
const CONCURRENCY = 8
const FSYNC = !process.argv.includes('--fsync=off')
const LIMIT_MS = 3 * 60 * 1000

if (findPostgresBinDir() === undefined) {
  console.log('bench:inbox-postgres: SKIPPED: no Postgres binaries found (set PG_BIN_DIR or install postgresql)')
  process.exit(0)
}
// Throws (as before) when running as root with no `postgres` user to run initdb as.
const server = await startPostgresServer({ fsync: FSYNC, maxConnections: 100 })
const watchdog = setTimeout(async () => {
  console.error(`bench:inbox-postgres: stopped after ${LIMIT_MS / 1000} s`)
  await server.stop()
  process.exit(1)
}, LIMIT_MS)

const encoder = new TextEncoder()
let sequence = 0
function delivery(twoKeys) {
  const id = `evt-${++sequence}`
  const body = JSON.stringify({ event: 'message.received', business_id: 'bench', conversation_id: id, message: { id, text: 'Hola, ¿tienen mesa para dos a las 20:00? 🍝', from: '+34600000000' } })
  return {
    keys: twoKeys ? [`bench:${id}`, `bench:v1 ${id}`] : [`bench:${id}`],
    endpoint: 'bench',
    id,
    timestamp: Math.floor(Date.now() / 1000),
    signatureVersion: 'v2',
    secretIndex: 0,
    rawBody: encoder.encode(body),
    receivedAt: Date.now(),
  }
}

/** Appends `count` deliveries from SENDERS concurrent senders; returns appends/s. */
async function appendPhase(inbox, count, twoKeys) {
  const batch = Array.from({ length: count }, () => delivery(twoKeys))
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (next < batch.length) {
        const result = await inbox.append(batch[next++])
        if (result !== 'accepted') throw new Error(`bench:inbox-postgres: an append was ${result}`)
      }
    }),
  )
  return count / ((performance.now() - started) / 1000)
}

const pools = []
const newPool = (max) => {
  const pool = new pg.Pool({ connectionString: server.url, max })
  pool.on('error', () => {})
  pools.push(pool)
  return pool
}
try {
  const pool = newPool(SENDERS)
  const inbox = new PostgresInbox({ pool, timeoutMs: 10_000 })
  await inbox.ensureTable()
  await appendPhase(inbox, 200, false) // warm: connections, plans, caches
  const oneKey = await appendPhase(inbox, N, false)
  const twoKeys = await appendPhase(inbox, N, true)

  const statsMs = []
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now()
    await inbox.stats()
    statsMs.push(performance.now() - t0)
  }
  statsMs.sort((a, b) => a - b)
  const depth = (await inbox.stats()).depth

  let processed = 0
  const workers = Array.from({ length: WORKERS }, () =>
    createInboxWorker({
      inbox: new PostgresInbox({ pool: newPool(CONCURRENCY + 2), timeoutMs: 10_000 }),
      concurrency: CONCURRENCY,
      pollIntervalMs: 10,
      onError: (error) => console.error(error),
      on: { 'message.received': () => void processed++ },
    }),
  )
  const started = performance.now()
  workers.forEach((worker) => worker.start())
  while ((await inbox.stats()).depth > 0) await new Promise((resolve) => setTimeout(resolve, 20))
  const drainS = (performance.now() - started) / 1000
  await Promise.all(workers.map((worker) => worker.stop(5_000)))
  if (processed !== depth) throw new Error(`bench:inbox-postgres: ${processed} handler runs for ${depth} deliveries`)

  const version = (await pool.query('SHOW server_version')).rows[0].server_version
  console.log(`PostgresInbox on Postgres ${version}, 127.0.0.1, fsync ${FSYNC ? 'on' : 'off'}, node ${process.versions.node}:`)
  console.log(`  append, 1 key (1 statement):      ${Math.round(oneKey)} appends/s (${N} appends, ${SENDERS} concurrent senders)`)
  console.log(`  append, 2 keys (1 transaction):   ${Math.round(twoKeys)} appends/s (${N} appends, ${SENDERS} concurrent senders)`)
  console.log(`  stats() at depth ${depth}:          median ${statsMs[10].toFixed(2)} ms, max ${statsMs[19].toFixed(2)} ms`)
  console.log(`  workers (${WORKERS} x concurrency ${CONCURRENCY}, no-op handler): ${Math.round(depth / drainS)} deliveries/s (take + complete; ${depth} in ${drainS.toFixed(2)} s)`)
} finally {
  clearTimeout(watchdog)
  await Promise.all(pools.map((pool) => pool.end()))
  await server.stop()
}
