// One inbox worker process of the ordering runs (tools/order/run.mjs): createInboxWorker from the
// built package over RedisInbox or PostgresInbox, with `ordering: byConversation` (or none, for
// the baseline), a handler that fails at random and always for the ids in ORDER_POISON. Every
// take, handler start and end is appended to ORDER_LOG synchronously, so a SIGKILL loses none.
// Config by environment: ORDER_ENGINE (redis | postgres), ORDER_URL, ORDER_LOG, ORDER_ORDERED
// ('0': no ordering; 'filed': the inbox's), ORDER_FAIL_RATE, ORDER_POISON (comma-separated ids), ORDER_CONCURRENCY,
// ORDER_VISIBILITY_MS, ORDER_HANDLER_MS, ORDER_RATE (rateLimit.perSecond; none when empty),
// ORDER_MAX_RETRY_AGE_MS, ORDER_CONNECTIONS (Postgres: the size of this process's pool; 10 when
// empty). Prints "READY" once taking deliveries, and on SIGTERM, once stopped,
// "STATS {"cpuMs": ...}" (the CPU this process used, for bench/order.mjs).
import { appendFileSync } from 'node:fs'
import { byConversation, createInboxWorker } from 'svc-webhooks'
import { openInbox } from '../soak/engines.mjs'

const env = process.env
const log = env.ORDER_LOG ?? ''
const failRate = Number(env.ORDER_FAIL_RATE ?? '0.1')
const poison = new Set((env.ORDER_POISON ?? '').split(',').filter(Boolean))
const handlerMs = Number(env.ORDER_HANDLER_MS ?? '2')
const now = () => performance.timeOrigin + performance.now()
const write = (line) => {
  if (log) appendFileSync(log, `${line}\n`)
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// 'filed': the inbox carries the ordering (appends file deliveries) and the worker takes it from there.
const filed = env.ORDER_ORDERED === 'filed'
const { inbox, close } = await openInbox({ engine: env.ORDER_ENGINE ?? 'redis', url: env.ORDER_URL ?? '', ...(filed && { ordering: byConversation }), ...(env.ORDER_CONNECTIONS && { connections: Number(env.ORDER_CONNECTIONS) }) })
const anyInbox = /** @type {any} */ (inbox)
// The take that handed each head out: "present" in the rules is what was appended before it.
if (typeof anyInbox.takeOrdered === 'function') {
  const takeOrdered = anyInbox.takeOrdered.bind(inbox)
  anyInbox.takeOrdered = async (/** @type {any[]} */ ...args) => {
    const at = now()
    const taken = await takeOrdered(...args)
    for (const entry of taken.run) write(`T ${entry.id} ${process.pid} ${at}`)
    return taken
  }
}
// A completion that leases its key's next head hands that head out as a take does.
if (typeof anyInbox.completeNext === 'function') {
  const completeNext = anyInbox.completeNext.bind(inbox)
  anyInbox.completeNext = async (/** @type {any[]} */ ...args) => {
    const at = now()
    const done = await completeNext(...args)
    if (done.next) write(`T ${done.next.id} ${process.pid} ${at}`)
    return done
  }
}
const take = anyInbox.take.bind(inbox)
anyInbox.take = async (/** @type {any[]} */ ...args) => {
  const at = now()
  const entries = await take(...args)
  for (const entry of entries) write(`T ${entry.id} ${process.pid} ${at}`)
  return entries
}

const rate = env.ORDER_RATE ? { perSecond: Number(env.ORDER_RATE) } : undefined
const worker = createInboxWorker({
  inbox,
  ...(env.ORDER_ORDERED === '1' && { ordering: byConversation }),
  ...(rate && { rateLimit: rate }),
  concurrency: Number(env.ORDER_CONCURRENCY ?? '10'),
  visibilityTimeoutMs: Number(env.ORDER_VISIBILITY_MS ?? '2000'),
  pollIntervalMs: 20,
  firstRetryDelayMs: 20,
  maxRetryDelayMs: 200,
  maxRetryAgeMs: Number(env.ORDER_MAX_RETRY_AGE_MS ?? '4000'),
  maxStalledCount: 10,
  log: (line) => {
    if (/paused|resumed/.test(line)) process.stderr.write(`${line}\n`)
  },
  on: {
    'message.received': async (_event, delivery) => {
      write(`S ${delivery.id} ${process.pid} ${now()} ${delivery.late ? 1 : 0}`)
      if (handlerMs > 0) await sleep(handlerMs)
      const ok = !poison.has(delivery.id) && Math.random() >= failRate
      write(`E ${delivery.id} ${process.pid} ${now()} ${ok ? 1 : 0}`)
      if (!ok) throw new Error('injected failure')
    },
  },
})
worker.start()
process.stdout.write('READY\n')
process.on('SIGTERM', () => {
  worker.stop(5000).then(async () => {
    await close()
    const cpu = process.cpuUsage()
    process.stdout.write(`STATS ${JSON.stringify({ cpuMs: Math.round((cpu.user + cpu.system) / 1000) })}\n`)
    process.exit(0)
  })
})
