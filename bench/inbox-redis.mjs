/**
 * `node bench/inbox-redis.mjs` (after `npm run build`): RedisInbox throughput through one
 * redis-server on this machine. Starts its own redis-server on a free port of 127.0.0.1 (a temp
 * dir, `appendonly yes` + `appendfsync always` as production should run it, and again with no
 * persistence for comparison), then for each client (ioredis, node-redis) measures, each phase
 * bounded by time:
 *
 * - appends/s with 1 append in flight (latency bound) and with 32 in flight (a busy receiver),
 *   1 KiB `message.received` bodies;
 * - worker deliveries/s: 4 `createInboxWorker`s with concurrency 4 on one RedisInbox draining
 *   what the append phases left, a handler that does nothing (take + complete per delivery).
 *
 * Talks to 127.0.0.1 only; prints one line per measurement and a JSON summary. Stops its server.
 * SVC_BENCH_SECONDS (default 3) bounds each phase; REDIS_SERVER_BIN picks the binary.
 */
import { randomUUID } from 'node:crypto'
import { cpus } from 'node:os'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { createInboxWorker } from 'svc-webhooks'
import { RedisInbox } from 'svc-webhooks/redis'
import { serializeEvent } from 'svc-webhooks/testing'
import { paddedEvent } from './deliveries.mjs'
import { startRedisServer } from '../tools/redis.mjs'

const SECONDS = Number(process.env.SVC_BENCH_SECONDS ?? 3)
const BIN = process.env.REDIS_SERVER_BIN || 'redis-server'
const BODY = new TextEncoder().encode(serializeEvent(paddedEvent(1024)))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const connectors = {
  async ioredis(url) {
    const client = new Redis(url)
    client.on('error', () => {})
    await client.ping()
    return { client, close: async () => void client.disconnect() }
  },
  async 'node-redis'(url) {
    const client = createClient({ url })
    client.on('error', () => {})
    await client.connect()
    return { client, close: async () => void client.destroy() }
  },
}

let sequence = 0
function delivery() {
  const id = `bench-${randomUUID()}-${++sequence}`
  return { keys: [`bench:${id}`], endpoint: 'bench', id, timestamp: Math.floor(Date.now() / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody: BODY, receivedAt: Date.now() }
}

/** Appends for SECONDS with `inFlight` appends outstanding; returns appends/s and the count. */
async function appendPhase(inbox, inFlight) {
  const deadline = performance.now() + SECONDS * 1000
  const started = performance.now()
  let count = 0
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        if ((await inbox.append(delivery())) !== 'accepted') throw new Error('bench: a fresh delivery was not accepted')
        count++
      }
    }),
  )
  return { count, perSecond: count / ((performance.now() - started) / 1000) }
}

/** 4 workers x concurrency 4 drain the inbox (at most SECONDS); returns deliveries/s. */
async function workerPhase(inbox, waiting) {
  let processed = 0
  const started = performance.now()
  const workers = Array.from({ length: 4 }, () =>
    createInboxWorker({ inbox, concurrency: 4, pollIntervalMs: 5, on: { 'message.received': () => void processed++ }, onError: (error) => console.error(error) }),
  )
  for (const worker of workers) worker.start()
  const deadline = started + SECONDS * 1000
  while (processed < waiting && performance.now() < deadline) await sleep(2)
  const elapsed = (performance.now() - started) / 1000
  const counted = processed
  await Promise.all(workers.map((worker) => worker.stop(5_000)))
  return { count: counted, perSecond: counted / elapsed }
}

const results = []
console.log(`RedisInbox through one redis-server on 127.0.0.1 (${cpus()[0]?.model ?? 'cpu'} x ${cpus().length}, Node ${process.version}); ${BODY.byteLength}-byte bodies; phases of ${SECONDS} s`)
for (const persist of [true, false]) {
  const redis = await startRedisServer({ persist, bin: BIN })
  const mode = persist ? 'appendonly yes, appendfsync always' : 'no persistence'
  try {
    for (const [name, connect] of Object.entries(connectors)) {
      const { client, close } = await connect(redis.url)
      try {
        const inbox = new RedisInbox({ client, prefix: `bench-${name}:` })
        const serial = await appendPhase(inbox, 1)
        const busy = await appendPhase(inbox, 32)
        const { depth } = await inbox.stats()
        const drained = await workerPhase(inbox, depth)
        const row = {
          redis: mode,
          client: name,
          appendsPerSecond1InFlight: Math.round(serial.perSecond),
          appendsPerSecond32InFlight: Math.round(busy.perSecond),
          workerDeliveriesPerSecond: Math.round(drained.perSecond),
          workerDeliveries: drained.count,
        }
        results.push(row)
        console.log(
          `[${mode} | ${name}] appends/s: ${row.appendsPerSecond1InFlight} (1 in flight), ${row.appendsPerSecond32InFlight} (32 in flight); ` +
            `worker deliveries/s (4 workers x concurrency 4, no-op handler): ${row.workerDeliveriesPerSecond} (${drained.count} of ${depth} in ${drained.count === depth ? 'full' : `${SECONDS} s`})`,
        )
      } finally {
        await close()
      }
    }
  } finally {
    await redis.stop()
  }
}
console.log(JSON.stringify(results, null, 2))
