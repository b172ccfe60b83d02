/**
 * One ordering scenario (keys, failures, arrival order, workers) run on any inbox that keeps
 * order, recording what the rules in tools/order/check.mjs are checked against.
 */
import fc from 'fast-check'
import { expect } from 'vitest'
import { byConversation, createInboxWorker, type InboxDelivery, type ModeEngine, type OrderingEngine, type WebhookEvent, type WebhookInbox } from 'svc-webhooks'

const encoder = new TextEncoder()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A `message.received` body of conversation `key` created at second `second` of a fixed minute (µs apart). */
export function body(key: string, index: number): Uint8Array {
  const created = `2026-05-01T10:00:${String(10 + Math.floor(index / 10)).padStart(2, '0')}.${String(index % 10).padStart(6, '0')}+00:00`
  return encoder.encode(JSON.stringify({ event: 'message.received', business_id: 'b', conversation_id: key, message: { id: `m-${key}-${index}`, chat_id: 'c', text: `#${index}`, from: 'x', sender_type: 'customer', created_at: created } }))
}

export function delivery(id: string, rawBody: Uint8Array, receivedAt: number): InboxDelivery {
  return { keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody, receivedAt }
}

export interface Scenario {
  keys: number[]
  /** Per delivery: failures before it succeeds (9: never succeeds). */
  failures: number[]
  arrival: number[]
  workers: number
  concurrency: number
  batches: number
  strict: boolean
  /**
   * Per delivery: appended through the inbox under test (true: an inbox with `ordering` files it)
   * or through `unfiled`, an inbox on the same storage without `ordering` (a worker places it).
   */
  filed?: boolean[]
}

/**
 * Runs a scenario on `inbox` with `workers` workers and returns what it recorded. With
 * `scenario.filed`, the deliveries marked false are appended through `unfiled`.
 */
export async function runScenario(inbox: WebhookInbox & OrderingEngine, scenario: Scenario, unfiled?: WebhookInbox) {
  let seq = 0
  // Which take last handed each delivery out, by sequence: "present" is what was appended before it.
  const takenAt = new Map<string, number>()
  const takeOrdered = inbox.takeOrdered.bind(inbox)
  inbox.takeOrdered = async (...args) => {
    const at = ++seq
    const taken = await takeOrdered(...args)
    for (const entry of taken.run) takenAt.set(entry.id, at)
    return taken
  }
  // A completion that leases its key's next head hands that head out as a take does.
  const completeNext = inbox.completeNext?.bind(inbox)
  if (completeNext) {
    inbox.completeNext = async (...args) => {
      const at = ++seq
      const done = await completeNext(...args)
      if (done.next) takenAt.set(done.next.id, at)
      return done
    }
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
      // Filed scenarios: the worker takes the ordering from its inbox.
      ...(scenario.filed === undefined && { ordering: { key: byConversation, strict: scenario.strict } }),
      concurrency: scenario.concurrency,
      pollIntervalMs: 2,
      firstRetryDelayMs: 1,
      maxRetryDelayMs: 4,
      maxRetryAgeMs: 60,
      log: false,
      on: {
        'message.received': async (event: WebhookEvent, d) => {
          const start = ++seq
          const n = (attempts.get(d.id) ?? 0) + 1
          attempts.set(d.id, n)
          await sleep(Math.random() < 0.5 ? 0 : 1)
          const ok = n > failuresOf.get(d.id)!
          runs.push({ id: d.id, start, end: ++seq, ok, late: d.late === true, takenAt: takenAt.get(d.id) ?? start })
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
      await (scenario.filed?.[i] === false && unfiled ? unfiled : inbox).append(delivery(p.id, body(p.key, p.index), Date.now()))
      deliveries.push({ id: p.id, key: p.key, order: p.order, appendedAt: ++seq })
    }
    await sleep(Math.floor(Math.random() * 3))
  }
  // Bounded: every delivery ends processed or dead well within this.
  for (let waited = 0; waited < 20_000; waited += 5) {
    const stats = await inbox.stats()
    if (stats.depth === 0) break
    await sleep(5)
  }
  await Promise.all(workers.map((worker) => worker.stop(1000)))
  const dead = (await inbox.dead(100_000)).map((letter) => ({ id: letter.id }))
  return { deliveries, runs, dead }
}

export const scenarios = fc
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

/** Scenarios whose deliveries are each filed at append or not. */
export const filedScenarios = scenarios.chain((s) => fc.array(fc.boolean(), { minLength: s.keys.length, maxLength: s.keys.length }).map((filed) => ({ ...s, filed })))

/** The ordering a scenario's inbox files by (the workers then take it from the inbox). */
export const scenarioOrdering = (s: Scenario) => ({ key: byConversation, strict: s.strict })

/**
 * A worker with `ordering` and one without on `inbox`: the later one takes nothing, says why
 * (its log line and a MixedOrderingError to onError), and goes on once the other stops.
 */
export async function runMixedWorkers(inbox: WebhookInbox & OrderingEngine): Promise<void> {
    const ran = { ordered: [] as string[], unordered: [] as string[] }
    const lines: string[] = []
    const errors: unknown[] = []
    const worker = (ordered: boolean) =>
      createInboxWorker({
        inbox,
        ...(ordered && { ordering: byConversation }),
        pollIntervalMs: 10,
        visibilityTimeoutMs: 3000,
        log: (line) => lines.push(line),
        onError: (error) => errors.push(error),
        on: { 'message.received': (_event, d) => void ran[ordered ? 'ordered' : 'unordered'].push(d.id) },
      })
    const until = async (done: () => boolean | Promise<boolean>) => {
      for (let waited = 0; !(await done()); waited += 10) {
        if (waited > 10_000) throw new Error('timed out')
        await sleep(10)
      }
    }
    const appendSome = async (tag: string, count: number) => {
      for (let i = 0; i < count; i++) await inbox.append(delivery(`${tag}${i}`, body(`k-${tag}`, i), Date.now()))
    }

    const ordered = worker(true)
    ordered.start()
    await appendSome('a', 4)
    await until(() => ran.ordered.length === 4)
    const unordered = worker(false)
    unordered.start()
    await until(() => lines.some((line) => line.includes('a worker with `ordering` runs on this inbox, and this one has none')))
    expect(errors.some((error) => (error as Error).name === 'MixedOrderingError')).toBe(true)
    await appendSome('b', 4)
    await until(async () => (await inbox.stats()).depth === 0)
    // Every one ran under the ordered worker: the unordered one took nothing.
    expect(ran.unordered).toEqual([])
    expect(ran.ordered).toHaveLength(8)

    // The ordered one stops (its mark goes with it): the unordered one goes on at once.
    await ordered.stop()
    await appendSome('c', 3)
    await until(() => ran.unordered.length === 3)
    // And now an ordered worker started beside it waits in turn.
    const late = worker(true)
    late.start()
    await until(() => lines.some((line) => line.includes('a worker without `ordering` runs on this inbox, and this one has `ordering`')))
    await unordered.stop()
    await appendSome('d', 2)
    await until(() => ran.ordered.length === 10)
    await late.stop()
}

/**
 * Workers of both modes marking at the same moment, `rounds` times over: the marks that succeed
 * are all of one mode and at least one does (the check and the mark are one step in the engine).
 */
export async function raceModeClaims(inbox: ModeEngine, rounds = 20, perMode = 6): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const claims = Array.from({ length: perMode * 2 }, (_, i) => ({ mode: i % 2 === 0 ? ('ordered' as const) : ('unordered' as const), worker: `w-${round}-${i}` }))
    const results = await Promise.all(claims.map((c) => inbox.claimMode(c.mode, c.worker, 10_000)))
    const won = new Set(claims.filter((_, i) => results[i]).map((c) => c.mode))
    expect([...won], `round ${round}`).toHaveLength(1)
    await Promise.all(claims.filter((_, i) => results[i]).map((c) => inbox.releaseMode(c.mode, c.worker)))
  }
}
