// @ts-check
// The failover experiment, shared by test/failover/*.test.ts and `npm run failover`
// (scripts/failover.mjs): signed deliveries at a steady rate from the sender simulator (10 s to
// answer, 5xx and 429 retried with the same id, other 4xx dropped) to a node:http receiver built
// from the package, while the engine under it fails over for real on 127.0.0.1: kill -9 of the
// Sentinel set's primary, or the primary cut off from its replicas and sentinels (clients still
// reach it) and rejoining as a replica; or kill -9 of a Postgres primary and the promote of its
// streaming standby. Then every delivery is resent, as a user's resend or the
// sender's later retry would. It counts what the sender counts and what the handler saw:
// consecutive non-2xx, permanent 4xx, lost (answered 2xx, never run), run twice.
import { createServer } from 'node:http'
import { randomUUID } from 'node:crypto'
import { byConversation, createInboxWorker } from 'svc-webhooks'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisInbox, RedisStore } from 'svc-webhooks/redis'
import { startStandbyPair } from './postgres-standby.mjs'
import { startSentinelSet } from './redis-sentinel.mjs'
import { deliveryIndex, resendAll, sendAtRate } from './soak/sender.mjs'
import { sampleEvent, serializeEvent } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_failover'

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * @typedef {object} FailoverFigures
 * @property {'store' | 'inbox'} path
 * @property {'kill' | 'partition' | 'promote'} fault
 * @property {number} deliveries
 * @property {number | undefined} switchMs from the fault to Sentinel naming the new primary
 * @property {number} maxConsecutiveFailures non-2xx in a row, as the sender counts them (it disables the endpoint at 20)
 * @property {number} permanent 4xx other than 429 (the sender drops the delivery)
 * @property {number} neverDelivered deliveries never answered 2xx
 * @property {number} lost answered 2xx and never run
 * @property {number} twice run more than once, the resend included
 * @property {number} resendFailures non-2xx answers to the resend
 * @property {Record<string, number>} statuses
 * @property {Record<string, number>} resendStatuses
 * @property {number} maxLatencyMs the slowest answer
 * @property {number} [overlapping] with `ordering`: handler starts while another delivery of the same conversation ran
 * @property {number} [outOfOrder] with `ordering`: starts of a message after a later one of its conversation had
 *   been processed, without `delivery.late` (the key's record of what it processed was lost)
 * @property {number} [late] with `ordering`: starts marked `delivery.late` (a resend or a retry of an older message)
 * @property {number} [chained] with `ordering`: completions that brought the worker its conversation's next message
 */

/**
 * Runs one scenario on a fresh Sentinel set (a primary, `replicas` replicas, three sentinels).
 *
 * @param {{
 *   path: 'store' | 'inbox',
 *   fault: 'kill' | 'partition',
 *   count?: number,
 *   rate?: number,
 *   faultAt?: number,
 *   partitionMs?: number,
 *   downAfterMs?: number,
 *   replicas?: number,
 *   config?: string[],
 *   receiver?: Record<string, unknown>,
 *   engine?: Record<string, unknown>,
 *   ordering?: boolean,
 *   log?: (line: string) => void,
 * }} options `count` deliveries at `rate`/s, the fault as delivery `faultAt` is sent; `partitionMs`
 *   how long the partition lasts; `config` extra options for every Redis node; `receiver` extra
 *   receiver options (e.g. `engineWaitMs`); `engine` extra RedisStore/RedisInbox options;
 *   `ordering` (inbox path) the deliveries in 20 conversations and the worker ordered by conversation
 * @returns {Promise<FailoverFigures>}
 * @example
 * const figures = await runRedisFailover({ path: 'store', fault: 'kill' })
 */
export async function runRedisFailover({ path, fault, count = 400, rate = 50, faultAt = 100, partitionMs = 10_000, downAfterMs = 5000, replicas = 2, config = [], receiver = {}, engine = {}, ordering = false, log = () => {} }) {
  const { default: Redis } = await import('ioredis')
  const set = await startSentinelSet({ replicas, downAfterMs, config })
  /** @type {import('ioredis').Redis[]} */
  const clients = []
  const client = () => {
    // ioredis's own `failoverDetector` is left off: what is tested is that the store and inbox
    // find the new primary themselves when the old one stops replicating.
    const redis = new Redis({ ...set.clientOptions(), lazyConnect: false })
    redis.on('error', () => {})
    clients.push(redis)
    return redis
  }
  try {
    return await experiment({
      path,
      fault,
      count,
      rate,
      faultAt,
      receiver,
      ordering,
      log,
      store: () => new RedisStore({ client: /** @type {any} */ (client()), ...engine }),
      inbox: () => new RedisInbox({ client: /** @type {any} */ (client()), ...engine }),
      inject: async () => {
        const from = await set.primaryPort()
        const faultAtMs = fault === 'kill' ? await set.killPrimary() : await set.partitionPrimary()
        log(`${fault} of the primary (port ${from})`)
        const switchedAt = await set.waitForSwitch(from, 30_000)
        /** @type {Promise<unknown> | undefined} */
        let settled
        if (fault === 'partition') {
          // The old primary stays cut off for `partitionMs`, still taking the clients' writes.
          await sleep(Math.max(0, faultAtMs + partitionMs - performance.now()))
          set.heal()
          log('partition healed')
          // Back as a replica of the new one: what it took alone is gone then.
          settled = set.waitForRejoin(from, 30_000).then((at) => {
            if (at === undefined) throw new Error('the old primary did not rejoin as a replica within 30 s')
          })
        }
        return { faultAtMs, switchedAt, settled }
      },
    })
  } finally {
    for (const redis of clients) redis.disconnect()
    await set.stop()
  }
}

/**
 * Runs one scenario on a Postgres primary and a streaming standby behind a proxy
 * (tools/postgres-standby.mjs): kill -9 of the primary, `pg_ctl promote` of the standby, the
 * proxy moved to it; the receiver's `pg.Pool` is never restarted.
 *
 * @param {{ path: 'store' | 'inbox', synchronous?: boolean, count?: number, rate?: number, faultAt?: number, promoteAfterMs?: number, receiver?: Record<string, unknown>, ordering?: boolean, log?: (line: string) => void }} options
 *   `promoteAfterMs`: from the kill to `pg_ctl promote` (default 6000: about 6.5 s of failover,
 *   inside the 8 s the target promises and past what the package waited before)
 * @returns {Promise<FailoverFigures>}
 * @example
 * const figures = await runPostgresFailover({ path: 'inbox', synchronous: true })
 */
export async function runPostgresFailover({ path, synchronous = true, count = 400, rate = 50, faultAt = 100, promoteAfterMs = 6000, receiver = {}, ordering = false, log = () => {} }) {
  const { default: pg } = await import('pg')
  const { PostgresInbox, PostgresStore } = await import('svc-webhooks/postgres')
  const pair = await startStandbyPair({ synchronous })
  /** @type {import('pg').Pool[]} */
  const pools = []
  const pool = () => {
    const created = new pg.Pool({ connectionString: pair.url, max: 10 })
    // The pool's idle connections die with the primary: pg reports each here and drops it.
    created.on('error', () => {})
    pools.push(created)
    return created
  }
  try {
    const store = new PostgresStore({ pool: pool() })
    const inbox = new PostgresInbox({ pool: pool() })
    await (path === 'store' ? store.ensureTable() : inbox.ensureTable())
    return await experiment({
      path,
      fault: 'promote',
      count,
      rate,
      faultAt,
      receiver,
      ordering,
      log,
      store: () => store,
      inbox: () => new PostgresInbox({ pool: pool() }),
      inject: async () => {
        const faultAtMs = performance.now()
        const switchedAt = await pair.failover(promoteAfterMs)
        log('standby promoted')
        return { faultAtMs, switchedAt, settled: undefined }
      },
    })
  } finally {
    for (const created of pools) await created.end().catch(() => {})
    await pair.stop()
  }
}

/**
 * The sender, the receiver on node:http, the worker (inbox path), the fault, the drain, the
 * resend of everything, and the counts.
 *
 * @param {{
 *   path: 'store' | 'inbox',
 *   fault: FailoverFigures['fault'],
 *   count: number,
 *   rate: number,
 *   faultAt: number,
 *   receiver: Record<string, unknown>,
 *   ordering: boolean,
 *   log: (line: string) => void,
 *   store: () => any,
 *   inbox: () => any,
 *   inject: () => Promise<{ faultAtMs: number, switchedAt: number | undefined, settled: Promise<unknown> | undefined }>,
 * }} options
 * @returns {Promise<FailoverFigures>}
 */
async function experiment({ path, fault, count, rate, faultAt, receiver, ordering, store, inbox: makeInbox, inject }) {
  /** @type {Map<string, number>} */
  const runs = new Map()
  const order = ordering ? orderChecks() : undefined
  const handler = async (/** @type {any} */ event, /** @type {{ id: string, late?: boolean }} */ delivery) => {
    runs.set(delivery.id, (runs.get(delivery.id) ?? 0) + 1)
    if (order) await order.run(event, delivery)
  }
  /** @type {{ stop: () => Promise<void> } | undefined} */
  let worker
  /** @type {any} */
  let inbox
  let handle
  if (path === 'store') {
    handle = createNodeHandler({ secret: SECRET, store: store(), log: false, on: { 'message.received': handler }, ...receiver })
  } else {
    inbox = makeInbox()
    handle = createNodeHandler({ secret: SECRET, inbox, log: false, ...receiver })
    const workerInbox = makeInbox()
    if (order) order.count(workerInbox)
    const w = createInboxWorker({ inbox: workerInbox, on: { 'message.received': handler }, pollIntervalMs: 50, log: false, ...(ordering && { ordering: byConversation }) })
    w.start()
    worker = w
  }
  const server = createServer(handle)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)))
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}/`
  try {
    /** @type {ReturnType<typeof inject> | undefined} */
    let injected
    const first = await sendAtRate({
      urls: [url],
      secret: SECRET,
      count,
      rate,
      ...(ordering && { make: conversationMessage }),
      onSchedule: (i) => {
        if (i === faultAt) injected = inject()
      },
    })
    const { faultAtMs, switchedAt, settled } = await /** @type {ReturnType<typeof inject>} */ (injected)
    await settled
    await drain(inbox)
    const again = await resendAll({ urls: [url], secret: SECRET, deliveries: first.deliveries })
    await drain(inbox)
    let lost = 0
    let twice = 0
    for (const id of first.ids) {
      const ran = runs.get(id) ?? 0
      if (first.delivered.has(id) && ran === 0) lost++
      if (ran > 1) twice++
    }
    const resendFailures = Object.entries(again.figures.statuses).reduce((sum, [status, n]) => (Number(status) >= 300 ? sum + n : sum), 0) + again.figures.timeouts + again.figures.networkErrors
    return {
      path,
      fault,
      deliveries: count,
      switchMs: switchedAt === undefined ? undefined : Math.round(switchedAt - faultAtMs),
      maxConsecutiveFailures: first.figures.maxConsecutiveFailures,
      permanent: first.figures.permanent.length + again.figures.permanent.length,
      neverDelivered: count - first.delivered.size,
      lost,
      twice,
      resendFailures,
      statuses: first.figures.statuses,
      resendStatuses: again.figures.statuses,
      maxLatencyMs: first.figures.latencyMs.max,
      ...order?.figures,
    }
  } finally {
    await worker?.stop()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(() => resolve(undefined)))
  }
}

const CONVERSATIONS = 20
const WRITTEN_FROM = Date.parse('2026-11-22T10:00:00Z')

/**
 * Delivery `index` of an ordered run: message `index` of conversation `index % 20`, written
 * `index` ms after the first, so a conversation's messages are in the order they are sent.
 *
 * @param {number} index
 */
function conversationMessage(index) {
  const event = sampleEvent('message.received')
  event.conversation_id = `conversation-${index % CONVERSATIONS}`
  event.message.chat_id = event.conversation_id
  event.message.id = randomUUID()
  event.message.text = `message ${index}`
  event.message.created_at = new Date(WRITTEN_FROM + index).toISOString()
  return { id: randomUUID(), index, body: serializeEvent(event) }
}

/**
 * What an ordered run's handler sees, per conversation: a start while another delivery of it
 * runs (overlapping), and a start of a message older than one of it already processed without
 * `delivery.late` (out of order: the key's record of what it processed did not survive). Each run
 * takes 5 ms, so two at once would overlap in time.
 */
function orderChecks() {
  /** @type {Set<string>} */
  const running = new Set()
  /** @type {Map<string, number>} */
  const processed = new Map()
  const figures = { overlapping: 0, outOfOrder: 0, late: 0, chained: 0 }
  return {
    figures,
    /** Counts the completions of `inbox` that hand out the next message. @param {any} inbox */
    count(inbox) {
      const completeNext = inbox.completeNext.bind(inbox)
      inbox.completeNext = async (/** @type {unknown[]} */ ...args) => {
        const done = await completeNext(...args)
        if (done.next) figures.chained++
        return done
      }
    },
    /** @param {any} event @param {{ late?: boolean }} delivery */
    async run(event, delivery) {
      const key = event.conversation_id
      const index = deliveryIndex(event)
      if (running.has(key)) figures.overlapping++
      if (delivery.late) figures.late++
      else if ((processed.get(key) ?? -1) > index) figures.outOfOrder++
      running.add(key)
      try {
        await sleep(5)
      } finally {
        running.delete(key)
      }
      processed.set(key, Math.max(processed.get(key) ?? -1, index))
    },
  }
}

/**
 * Waits (bounded: 30 s) until the inbox holds nothing due or leased, so every accepted delivery has run.
 *
 * @param {{ stats: () => Promise<{ depth: number }> } | undefined} inbox
 */
async function drain(inbox) {
  if (!inbox) return
  for (let i = 0; i < 300; i++) {
    try {
      const stats = await inbox.stats()
      if (stats.depth === 0) return
    } catch {
      // The inbox is still reaching its new primary: ask again.
    }
    await sleep(100)
  }
}
