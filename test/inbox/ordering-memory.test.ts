/**
 * The ordering rules (DESIGN.md "Order within a conversation") as properties on MemoryInbox: any
 * arrival order, any failure pattern, any number of workers and any concurrency. Per key, starts
 * follow `created_at` among the deliveries present, never two at once, every delivery succeeds
 * once or is dead-lettered, and `late` says exactly when a later message of its key went first.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryInbox, byConversation, createInboxWorker, type InboxDelivery, type InboxEntry, type WebhookEvent } from 'svc-webhooks'
// @ts-expect-error plain .mjs shared with the scripts, typed by JSDoc
import { orderViolations } from '../../tools/order/check.mjs'

const encoder = new TextEncoder()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A `message.received` body of conversation `key` created at second `second` of a fixed minute (µs apart). */
function body(key: string, index: number): Uint8Array {
  const created = `2026-05-01T10:00:${String(10 + Math.floor(index / 10)).padStart(2, '0')}.${String(index % 10).padStart(6, '0')}+00:00`
  return encoder.encode(JSON.stringify({ event: 'message.received', business_id: 'b', conversation_id: key, message: { id: `m-${key}-${index}`, chat_id: 'c', text: `#${index}`, from: 'x', sender_type: 'customer', created_at: created } }))
}

function delivery(id: string, rawBody: Uint8Array, receivedAt: number): InboxDelivery {
  return { keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody, receivedAt }
}

interface Scenario {
  keys: number[]
  /** Per delivery: failures before it succeeds (9: never succeeds). */
  failures: number[]
  arrival: number[]
  workers: number
  concurrency: number
  batches: number
  strict: boolean
}

/** Runs a scenario on one MemoryInbox with `workers` workers and returns what it recorded. */
async function run(scenario: Scenario) {
  let seq = 0
  const inbox = new MemoryInbox()
  // Which take handed each lease out, by sequence: "present" is what was appended before it.
  const takenAt = new Map<string, number>()
  const takeOrdered = inbox.takeOrdered.bind(inbox)
  inbox.takeOrdered = async (...args) => {
    const at = ++seq
    const taken = await takeOrdered(...args)
    for (const entry of taken.run) takenAt.set(entry.lease, at)
    return taken
  }
  const deliveries: { id: string; key: string; order: string; appendedAt: number }[] = []
  const runs: { id: string; start: number; end: number; ok: boolean; late?: boolean; takenAt?: number }[] = []
  const attempts = new Map<string, number>()
  const failuresOf = new Map<string, number>()
  const perKeyIndex = new Map<string, number>()
  const planned = scenario.keys.map((k, i) => {
    const key = `k${k}`
    const index = perKeyIndex.get(key) ?? 0
    perKeyIndex.set(key, index + 1)
    const id = `d${i}`
    failuresOf.set(id, scenario.failures[i]!)
    return { id, key, index, order: `${String(index).padStart(4, '0')}` }
  })
  const workers = Array.from({ length: scenario.workers }, () =>
    createInboxWorker({
      inbox,
      ordering: { key: byConversation, strict: scenario.strict },
      concurrency: scenario.concurrency,
      pollIntervalMs: 2,
      firstRetryDelayMs: 1,
      maxRetryDelayMs: 4,
      maxRetryAgeMs: 60,
      log: false,
      on: {
        'message.received': async (event: WebhookEvent, d) => {
          const start = ++seq
          const entry = d as unknown as InboxEntry
          const n = (attempts.get(d.id) ?? 0) + 1
          attempts.set(d.id, n)
          await sleep(Math.random() < 0.5 ? 0 : 1)
          const ok = n > failuresOf.get(d.id)!
          runs.push({ id: d.id, start, end: ++seq, ok, late: d.late === true, takenAt: takenAt.get((entry as { lease?: string }).lease ?? '') ?? start })
          void event
          if (!ok) throw new Error('injected failure')
        },
      },
    }),
  )
  for (const worker of workers) worker.start()
  const order = scenario.arrival.map((rank, i) => [rank, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map(([, i]) => i)
  const perBatch = Math.ceil(order.length / scenario.batches)
  for (let b = 0; b < order.length; b += perBatch) {
    for (const i of order.slice(b, b + perBatch)) {
      const p = planned[i]!
      await inbox.append(delivery(p.id, body(p.key, p.index), Date.now()))
      deliveries.push({ id: p.id, key: p.key, order: p.order, appendedAt: ++seq })
    }
    await sleep(Math.floor(Math.random() * 3))
  }
  // Bounded: every delivery ends processed or dead well within this.
  for (let waited = 0; waited < 10_000; waited += 5) {
    const stats = await inbox.stats()
    if (stats.depth === 0) break
    await sleep(5)
  }
  await Promise.all(workers.map((worker) => worker.stop(1000)))
  const dead = (await inbox.dead(Infinity)).map((letter) => ({ id: letter.id }))
  return { deliveries, runs, dead }
}

const scenario = fc
  .integer({ min: 1, max: 14 })
  .chain((n) =>
    fc.record({
      keys: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: n, maxLength: n }),
      failures: fc.array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 2 }), fc.constant(9)), { minLength: n, maxLength: n }),
      arrival: fc.array(fc.integer({ min: 0, max: 100 }), { minLength: n, maxLength: n }),
      workers: fc.integer({ min: 1, max: 3 }),
      concurrency: fc.integer({ min: 1, max: 4 }),
      batches: fc.integer({ min: 1, max: 4 }),
      strict: fc.boolean(),
    }),
  )

describe('ordering on MemoryInbox (properties)', () => {
  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const record = await run(s)
        const problems = orderViolations({ ...record, strict: s.strict })
        expect(problems).toEqual([])
        // A delivery that never fails is processed, whatever fails around it.
        const dead = new Set(record.dead.map((d) => d.id))
        s.failures.forEach((f, i) => {
          if (f === 0) expect(dead.has(`d${i}`)).toBe(false)
        })
      }),
      { numRuns: 40 },
    )
  }, 120_000)
})
