// @ts-check
// A worker process of the crash-loop test (test/inbox/crash-loop.test.ts): createInboxWorker from
// the built package over the parent's inbox, reached over IPC (the parent's MemoryInbox outlives
// this process, as a database would), or over RedisInbox/PostgresInbox (CRASH_ENGINE, CRASH_URL).
// Its handler takes the process down for the delivery whose text is "poison": an uncaught throw
// in a timer, as a callback-style library would, while the others are still running. Each other
// delivery sends { ran: id } to the parent once its work is done.
import { createInboxWorker } from 'svc-webhooks'

const env = process.env
const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms))
const send = (/** @type {unknown} */ message) => /** @type {(m: unknown) => void} */ (process.send)(message)

/** @returns {Promise<import('svc-webhooks').WebhookInbox>} */
async function openInbox() {
  if (env.CRASH_ENGINE && env.CRASH_ENGINE !== 'ipc') {
    const { openInbox: open } = await import('../../../tools/soak/engines.mjs')
    return (await open({ engine: env.CRASH_ENGINE, url: /** @type {string} */ (env.CRASH_URL) })).inbox
  }
  /** @type {Map<number, { resolve: (v: unknown) => void, reject: (e: unknown) => void }>} */
  const pending = new Map()
  let sequence = 0
  process.on('message', (/** @type {{ n: number, result?: unknown, error?: string }} */ { n, result, error }) => {
    const call = pending.get(n)
    pending.delete(n)
    if (error !== undefined) call?.reject(new Error(error))
    else call?.resolve(result)
  })
  /** @param {string} op */
  const remote =
    (op) =>
    (/** @type {unknown[]} */ ...args) =>
      new Promise((resolve, reject) => {
        const n = ++sequence
        pending.set(n, { resolve, reject })
        send({ n, op, args })
      })
  const ops = ['append', 'take', 'complete', 'retry', 'bury', 'extend', 'dead', 'requeue', 'purge', 'stats']
  return /** @type {import("svc-webhooks").WebhookInbox} */ (/** @type {unknown} */ (Object.fromEntries(ops.map((op) => [op, remote(op)]))))
}

const inbox = await openInbox()
const worker = createInboxWorker({
  inbox,
  visibilityTimeoutMs: Number(env.CRASH_VISIBILITY_MS ?? '300'),
  maxStalledCount: Number(env.CRASH_MAX_STALLED ?? '3'),
  pollIntervalMs: 20,
  log: false,
  on: {
    'message.received': async (event, delivery) => {
      if (event.message.text === 'poison') {
        setTimeout(() => {
          throw new Error('poison: an uncaught throw in a callback')
        }, 20)
        return new Promise(() => {})
      }
      // Slow enough to be running when the poison takes the process down.
      await sleep(150)
      send({ ran: delivery.id })
    },
  },
})
worker.start()
send({ ready: process.pid })
