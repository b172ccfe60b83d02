// One inbox worker process of the inbox soak (inbox-soak.mjs): createInboxWorker from the built
// package over RedisInbox or PostgresInbox, with an idempotent handler (effects.mjs) that fails
// at random (SOAK_FAIL_RATE) and while the downstream outage flag is set. The soak kills these
// processes with SIGKILL mid-run; whatever a killed worker held is taken over by another once its
// lease (SOAK_VISIBILITY_MS) expires.
// Config by environment: SOAK_ENGINE (redis | postgres), SOAK_INBOX_URL, SOAK_CLIENT (ioredis |
// node-redis, Redis only), SOAK_EFFECTS_URL (a Redis URL, or the Postgres URL), SOAK_FAIL_RATE,
// SOAK_CONCURRENCY, SOAK_VISIBILITY_MS, SOAK_FIRST_RETRY_MS, SOAK_MAX_RETRY_MS, SOAK_GUARD ('0': the
// handler is not idempotent, to show what the guard prevents), SOAK_POISON_INDEX (the delivery
// whose handler takes the process down, by an uncaught throw in a timer; -1 for none),
// SOAK_HANG_RATE (share of handler runs that never settle, ignoring their signal, before their
// write), SOAK_HANDLER_TIMEOUT_MS, SOAK_MAX_STALLED.
// Prints "READY" once taking deliveries; "STATS <json>" after a graceful stop on SIGTERM.
import { appendFileSync } from 'node:fs'
import { createInboxWorker } from 'svc-webhooks'
import { postgresEffects, redisEffects } from './effects.mjs'
import { connectPostgres, connectRedis, openInbox } from './engines.mjs'
import { deliveryIndex } from './sender.mjs'

const env = process.env
const engine = env.SOAK_ENGINE ?? 'redis'
const failRate = Number(env.SOAK_FAIL_RATE ?? '0.1')
const hangRate = Number(env.SOAK_HANG_RATE ?? '0')
const poisonIndex = Number(env.SOAK_POISON_INDEX ?? '-1')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const { inbox, close } = await openInbox({ engine, url: env.SOAK_INBOX_URL, client: env.SOAK_CLIENT })
// SOAK_TRACE=<file>: one line per take, handler start and ack, with ids and this pid, written
// synchronously so a SIGKILL or a crash loses none (off by default).
const trace = env.SOAK_TRACE ? (line) => appendFileSync(env.SOAK_TRACE, `${Date.now()} ${process.pid} ${line}\n`) : undefined
if (trace) {
  const take = inbox.take.bind(inbox)
  inbox.take = async (max, visibilityMs) => {
    const entries = await take(max, visibilityMs)
    if (entries.length > 0) trace(`take max=${max} ${entries.map((e) => `${e.id}:t${e.takes}a${e.attempts}`).join(' ')}`)
    return entries
  }
  for (const name of ['complete', 'retry', 'bury', 'extend']) {
    const call = inbox[name].bind(inbox)
    inbox[name] = async (entry, ...rest) => {
      const answer = await call(entry, ...rest).catch((error) => {
        trace(`${name} ${entry.id} ${name === 'extend' ? rest[0] : ''} threw ${error?.name}`)
        throw error
      })
      if (name !== 'extend' || answer !== true || rest[0] === 0) trace(`${name} ${entry.id} ${name === 'extend' ? rest[0] : ''} -> ${answer}`)
      return answer
    }
  }
}
const guard = env.SOAK_GUARD !== '0'
const effects =
  engine === 'postgres'
    ? postgresEffects(await connectPostgres(env.SOAK_EFFECTS_URL), { guard })
    : redisEffects((await connectRedis(env.SOAK_EFFECTS_URL)).client, { guard })

const outcomes = {}
let inboxErrors = 0
let hung = 0

const worker = createInboxWorker({
  inbox,
  concurrency: Number(env.SOAK_CONCURRENCY ?? '8'),
  visibilityTimeoutMs: Number(env.SOAK_VISIBILITY_MS ?? '2000'),
  firstRetryDelayMs: Number(env.SOAK_FIRST_RETRY_MS ?? '50'),
  maxRetryDelayMs: Number(env.SOAK_MAX_RETRY_MS ?? '1000'),
  pollIntervalMs: 50,
  handlerTimeoutMs: Number(env.SOAK_HANDLER_TIMEOUT_MS ?? '1000'),
  maxStalledCount: Number(env.SOAK_MAX_STALLED ?? '3'),
  log: false,
  on: {
    'message.received': async (event, delivery) => {
      trace?.(`run ${delivery.id}${deliveryIndex(event) === poisonIndex ? ' POISON' : ''}`)
      if (deliveryIndex(event) === poisonIndex) {
        setTimeout(() => {
          throw new Error('poison: an uncaught throw in a callback')
        }, 5)
        return new Promise(() => {})
      }
      // A hung call (a socket that never answers): the worker's deadline frees the slot.
      if (Math.random() < hangRate) {
        hung++
        // Logged where the verdict reads it: a worker killed later never prints its STATS.
        await effects.hang(delivery.id, process.pid)
        return new Promise(() => {})
      }
      await sleep(Math.random() * 5) // some work before the write
      if (Math.random() < failRate) {
        await effects.fail(delivery.id, process.pid)
        throw new Error('injected failure')
      }
      await effects.apply(delivery.id, process.pid)
      // Some work after the write: a SIGKILL landing here leaves the effect applied and the
      // delivery not completed in the inbox, so it runs again elsewhere and the guard skips it.
      await sleep(Math.random() * 5)
    },
  },
  onResult(result) {
    outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1
  },
  onError() {
    // The inbox itself failed (Redis restarting): the worker waits and goes on; counted here.
    inboxErrors++
  },
})
worker.start()
process.stdout.write('READY\n')

process.once('SIGTERM', async () => {
  await worker.stop(5000)
  process.stdout.write(`STATS ${JSON.stringify({ pid: process.pid, outcomes, inboxErrors, hung })}\n`, async () => {
    await Promise.allSettled([close(), effects.close()])
    process.exit(0)
  })
})
