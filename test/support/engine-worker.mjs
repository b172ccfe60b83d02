// A worker process over a job-queue engine, for the tests that kill one with SIGKILL:
// `node test/support/engine-worker.mjs <bullmq|pg-boss> <url> <queue> <store|no-store>`.
// Its handler records each run (pid and delivery id) in the engine's own server (a Redis list,
// a Postgres table), so the record survives the kill; once the processor reports a delivery
// processed (the handler succeeded, the store completed, the engine not yet told) the process
// kills itself: the engine then hands the job out again to another worker.
// Prints `ready` once it consumes jobs.

const [engine, url, queueName, storeMode] = process.argv.slice(2)
const withStore = storeMode === 'store'
const die = () => process.kill(process.pid, 'SIGKILL')

if (engine === 'bullmq') {
  const { Redis } = await import('ioredis')
  const { Worker } = await import('bullmq')
  const { createBullMQProcessor } = await import('svc-webhooks/bullmq')
  const { RedisStore } = await import('svc-webhooks/redis')
  const client = new Redis(url)
  const processor = createBullMQProcessor({
    on: { 'message.received': async (_event, delivery) => void (await client.rpush(`runs:${queueName}`, `${process.pid} ${delivery.id}`)) },
    ...(withStore && { store: new RedisStore({ client }) }),
    log: false,
    onResult: (result) => result.outcome === 'processed' && die(),
  })
  // A short lock: the killed worker's job is stalled, and taken back, within about a second.
  const worker = new Worker(queueName, processor, { connection: { url }, lockDuration: 1000, stalledInterval: 500 })
  await worker.waitUntilReady()
  console.log('ready')
} else if (engine === 'pg-boss') {
  const { PgBoss } = await import('pg-boss')
  const pg = (await import('pg')).default
  const { createPgBossHandler } = await import('svc-webhooks/pg-boss')
  const { PostgresStore } = await import('svc-webhooks/postgres')
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  const boss = new PgBoss({ connectionString: url, max: 4 })
  boss.on('error', () => {})
  await boss.start()
  const handler = createPgBossHandler({
    on: { 'message.received': async (_event, delivery) => void (await pool.query('INSERT INTO runs (queue, pid, id) VALUES ($1, $2, $3)', [queueName, process.pid, delivery.id])) },
    ...(withStore && { store: new PostgresStore({ pool }) }),
    log: false,
    onResult: (result) => result.outcome === 'processed' && die(),
  })
  await boss.work(queueName, { pollingIntervalSeconds: 0.5 }, handler)
  console.log('ready')
} else {
  throw new Error(`engine-worker: unknown engine ${engine}`)
}
