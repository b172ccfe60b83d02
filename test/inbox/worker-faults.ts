/**
 * The inbox worker under the faults it exists for, run over any inbox (the engine is a parameter:
 * MemoryInbox in worker-faults.test.ts, real Redis and Postgres in worker-engines.test.ts). Where
 * a fault is the engine's answer (an ack that does not come back, a refusal, a lost lease), the
 * real engine is wrapped and only that answer is replaced: the worker is what is under test.
 *
 * - an ack the inbox does not answer is retried while the lease lasts: the handler runs once;
 * - a refused ack is reported as refused, not retried; `false` from extend is a lost lease;
 * - a delivery handed out too often with no result is buried, never run;
 * - a handler that never settles frees its slot at `handlerTimeoutMs`;
 * - `stop()` hands back what a take in flight brings, and what waits its turn at the gate, and
 *   waits for what it started; a handler whose signal is aborted before it starts never starts;
 * - error text is stored without U+0000, lone surrogates, or unbounded length;
 * - a requeued dead letter that fails again is retried, its budget counted from the requeue;
 * - throwing hooks end nothing; the default log says what happened, never the body or a message.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  createInboxWorker,
  InboxError,
  MemoryStore,
  type InboxDelivery,
  type InboxWorkerOptions,
  type InboxWorkerResult,
  type WebhookInbox,
} from 'svc-webhooks'
import { sampleEvent } from 'svc-webhooks/testing'

export type FaultInboxFactory = () => Promise<WebhookInbox>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits (bounded) until `done()` holds. */
export async function until(done: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await sleep(10)
  }
}

/** A delivery whose body is a `message.received` event with `text`, under fresh keys. */
export function textDelivery(text: string, overrides: Partial<InboxDelivery> = {}): InboxDelivery {
  const event = sampleEvent('message.received')
  event.message.text = text
  const id = `evt-${randomUUID()}`
  return {
    keys: [`tenant:${id}`],
    endpoint: 'tenant',
    id,
    timestamp: Math.floor(Date.now() / 1000),
    signatureVersion: 'v2',
    secretIndex: 0,
    rawBody: new TextEncoder().encode(JSON.stringify(event)),
    receivedAt: Date.now(),
    ...overrides,
  }
}

/** `inbox` with some of its answers replaced; every other method is the engine's own. */
export function wrap(inbox: WebhookInbox, overrides: Partial<WebhookInbox>): WebhookInbox {
  return {
    append: (d) => inbox.append(d),
    take: (max, ms) => inbox.take(max, ms),
    complete: (e) => inbox.complete(e),
    retry: (e, ms, error) => inbox.retry(e, ms, error),
    bury: (e, error) => inbox.bury(e, error),
    extend: (e, ms) => inbox.extend(e, ms),
    dead: (limit) => inbox.dead(limit),
    requeue: (key) => inbox.requeue(key),
    purge: (key) => inbox.purge(key),
    stats: () => inbox.stats(),
    ...overrides,
  }
}

/** A worker over `inbox` whose handler runs `behaviour(text, delivery)`, recording runs, results and lines. */
export function testWorker(
  inbox: WebhookInbox,
  behaviour: (text: string, signal: AbortSignal | undefined) => unknown,
  options: Partial<InboxWorkerOptions> = {},
) {
  const runs: string[] = []
  const results: InboxWorkerResult[] = []
  const lines: string[] = []
  const worker = createInboxWorker({
    inbox,
    pollIntervalMs: 10,
    firstRetryDelayMs: 20,
    onResult: (result) => void results.push(result),
    log: (line) => void lines.push(line),
    on: {
      'message.received': async (event, delivery) => {
        runs.push(delivery.id)
        await behaviour(event.message.text, delivery.signal)
      },
    },
    ...options,
  })
  return { worker, runs, results, lines }
}

/**
 * The fault suite over one engine.
 *
 */
export function describeWorkerFaults(name: string, fresh: FaultInboxFactory): void {
  describe(`inbox worker faults: ${name}`, () => {
    /** The stalled checks read `takes`: skipped, the title saying why, on an engine that does not count them. */
    it('an ack the inbox does not answer is retried while the lease lasts: the handler runs once', async () => {
      const inbox = await fresh()
      const d = textDelivery('ack blip')
      await inbox.append(d)
      let completes = 0
      // The first three completes fail as a dropped connection does; the lease (300 ms) is renewed meanwhile.
      const flaky = wrap(inbox, {
        complete: async (entry) => {
          if (++completes <= 3) throw new InboxError('unavailable', 'TestInbox.complete', 'svc-webhooks: the inbox did not answer (test)')
          return inbox.complete(entry)
        },
      })
      const { worker, runs, results } = testWorker(flaky, () => {}, { visibilityTimeoutMs: 300 })
      worker.start()
      await until(() => results.length === 1)
      // Long enough for a lapsed lease to be taken again and run a second time.
      await sleep(600)
      await worker.stop()
      expect(results.map((r) => r.outcome)).toEqual(['processed'])
      expect(completes).toBe(4)
      expect(runs).toEqual([d.id])
      expect((await inbox.stats()).depth).toBe(0)
    })

    it('a refused ack is reported as refused, once, and never called unreachable', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('refused ack'))
      let completes = 0
      const errors: unknown[] = []
      const refusing = wrap(inbox, {
        complete: async () => {
          completes++
          throw new InboxError('refused', 'TestInbox.complete', 'svc-webhooks: the inbox refused the call (test)')
        },
      })
      const { worker, results, lines } = testWorker(refusing, () => {}, { visibilityTimeoutMs: 5000, onError: (error) => void errors.push(error) })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(results[0]).toMatchObject({ outcome: 'unrecorded', error: { kind: 'refused' } })
      expect(completes).toBe(1)
      expect(errors).toHaveLength(1)
      const line = lines.find((l) => l.includes('could not record'))
      expect(line).toContain('refused')
      expect(line).not.toMatch(/unreachable|did not answer|unavailable/)
    })

    it('an ack unanswered until the lease ends is reported unrecorded, not retried past the lease', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('long blip'))
      let completes = 0
      const down = wrap(inbox, {
        complete: async () => {
          completes++
          throw new InboxError('unavailable', 'TestInbox.complete', 'svc-webhooks: the inbox did not answer (test)')
        },
        extend: async () => {
          throw new InboxError('unavailable', 'TestInbox.extend', 'svc-webhooks: the inbox did not answer (test)')
        },
      })
      const { worker, results } = testWorker(down, () => {}, { visibilityTimeoutMs: 400 })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(results[0]).toMatchObject({ outcome: 'unrecorded', error: { kind: 'unavailable' } })
      // Tried again while the 400 ms lease lasted, and not after: a handful of tries, not a loop.
      expect(completes).toBeGreaterThanOrEqual(2)
      expect(completes).toBeLessThanOrEqual(10)
    })

    it('false from extend is a lost lease: renewal stops, the handler\'s signal aborts, the result says lease_lost', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('lease lost'))
      // Extends asked per lease: the first false ends the renewal of that lease.
      const extendsByLease = new Map<string, number>()
      const lost = wrap(inbox, {
        extend: async (entry) => (extendsByLease.set(entry.lease, (extendsByLease.get(entry.lease) ?? 0) + 1), false),
        complete: async () => false,
      })
      let reason: unknown
      const { worker, results, lines } = testWorker(
        lost,
        (_text, signal) =>
          new Promise<void>((resolve) => {
            signal!.addEventListener('abort', () => resolve(void (reason = signal!.reason)))
          }),
        { visibilityTimeoutMs: 90, handlerTimeoutMs: 10_000 },
      )
      worker.start()
      await until(() => results.length === 1)
      await sleep(100)
      await worker.stop()
      expect(results[0]!.outcome).toBe('lease_lost')
      expect(reason).toMatchObject({ name: 'LeaseLostError' })
      expect(extendsByLease.size).toBeGreaterThanOrEqual(1)
      for (const count of extendsByLease.values()) expect(count).toBe(1)
      expect(lines.some((l) => l.includes('lost the lease'))).toBe(true)
    })

    it('a lease lost before the handler starts (during a slow store claim): the handler is never started, the claim is released', async () => {
      const inbox = await fresh()
      const d = textDelivery('lost before start')
      await inbox.append(d)
      const lost = wrap(inbox, { extend: async () => false, retry: async () => false, complete: async () => false })
      const memory = new MemoryStore()
      let claimed = false
      const store = {
        // Slower than the first renewal (every 30 ms), which answers that the lease is gone.
        claim: async (key: string, owner: string, ms: number) => ((claimed = true), await sleep(150), memory.claim(key, owner, ms)),
        complete: (key: string, owner: string, ms: number) => memory.complete(key, owner, ms),
        release: (key: string, owner: string) => memory.release(key, owner),
      }
      const { worker, runs, results } = testWorker(lost, () => {}, { store, visibilityTimeoutMs: 90 })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(claimed).toBe(true)
      expect(runs).toEqual([])
      expect(results[0]).toMatchObject({ outcome: 'lease_lost', id: d.id })
      // Released: the worker that holds the delivery now can claim it.
      expect(await memory.claim(`tenant:${d.id}`, 'next-owner', 1000)).toBe('claimed')
    })

    it('a delivery handed out more than maxStalledCount times without a result is buried with the reason, never run', async () => {
      const inbox = await fresh()
      const d = textDelivery('poison')
      await inbox.append(d)
      // Four hand-outs whose workers "died": their leases lapse with no result recorded.
      for (let i = 0; i < 4; i++) {
        expect(await inbox.take(1, 1)).toHaveLength(1)
        await sleep(20)
      }
      const { worker, runs, results, lines } = testWorker(inbox, () => {}, { maxStalledCount: 3 })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(runs).toEqual([])
      expect(results[0]).toMatchObject({ outcome: 'dead', id: d.id })
      const dead = await inbox.dead()
      expect(dead).toHaveLength(1)
      expect(dead[0]!.lastError).toBe('handed out 5 times without a result: the handler may be crashing the process')
      expect(lines.filter((l) => l.includes('dead letters'))).toHaveLength(1)
    })

    it('a delivery with maxStalledCount stalls or fewer still runs', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('unlucky'))
      for (let i = 0; i < 3; i++) {
        await inbox.take(1, 1)
        await sleep(20)
      }
      const { worker, runs, results } = testWorker(inbox, () => {}, { maxStalledCount: 3 })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(runs).toHaveLength(1)
      expect(results[0]!.outcome).toBe('processed')
    })

    it('a handler that never settles: past handlerTimeoutMs its signal aborts, its slot is freed, it is retried by the backoff', async () => {
      const inbox = await fresh()
      const hung = textDelivery('hang')
      await inbox.append(hung)
      const others = Array.from({ length: 5 }, (_, i) => textDelivery(`fine ${i}`))
      for (const d of others) await inbox.append(d)
      let aborted: unknown
      const { worker, results } = testWorker(
        inbox,
        (text, signal) => {
          if (text !== 'hang') return
          signal!.addEventListener('abort', () => (aborted = signal!.reason))
          return new Promise(() => {})
        },
        // One slot: with the hung handler holding it, nothing else would ever run.
        { concurrency: 1, handlerTimeoutMs: 200, firstRetryDelayMs: 60_000 },
      )
      worker.start()
      await until(() => results.filter((r) => r.outcome === 'processed').length === others.length)
      await worker.stop()
      const timedOut = results.find((r) => r.id === hung.id)
      expect(timedOut).toMatchObject({ outcome: 'retrying', retryInMs: 60_000 })
      expect((timedOut!.error as Error).message).toBe('handler timed out after 200 ms')
      expect(aborted).toMatchObject({ name: 'TimeoutError' })
      expect(await inbox.stats()).toMatchObject({ depth: 1, retrying: 1 })
    })

    it('stop() during a slow take: what it brings back is handed back unrun, at once', async () => {
      const inbox = await fresh()
      const d = textDelivery('late take')
      await inbox.append(d)
      let taking = false
      const slow = wrap(inbox, {
        take: async (max, ms) => {
          taking = true
          const entries = await inbox.take(max, ms)
          await sleep(300)
          return entries
        },
      })
      const { worker, runs } = testWorker(slow, () => {})
      worker.start()
      await until(() => taking)
      await worker.stop()
      expect(runs).toEqual([])
      // Handed back: due now, not after its 60 s lease.
      const again = await inbox.take(1, 1000)
      expect(again.map((e) => e.id)).toEqual([d.id])
    })

    /** A worker running `first` (held until `finishFirst`) whose next take waits for `releaseTakes`. */
    async function busyWorker(inbox: WebhookInbox) {
      const first = textDelivery('first')
      await inbox.append(first)
      let releaseTakes!: () => void
      const takesReleased = new Promise<void>((resolve) => (releaseTakes = resolve))
      let takes = 0
      // The worker's first take brings the first delivery alone; its next waits until the suspects are set up.
      const held = wrap(inbox, {
        take: async (max, ms) => {
          if (++takes > 1) await takesReleased
          return inbox.take(max, ms)
        },
      })
      let finishFirst!: () => void
      const firstFinishes = new Promise<void>((resolve) => (finishFirst = resolve))
      const { worker, runs } = testWorker(held, (text) => (text === 'first' ? firstFinishes : undefined))
      worker.start()
      await until(() => runs.length === 1)
      return { first, worker, runs, releaseTakes, finishFirst }
    }

    /**
     * Suspects: each handed out once before, its lease lapsed with no result, so it runs alone.
     * In the order the inbox hands them out (deliveries appended within one millisecond may come
     * in another order than appended, e.g. by id on Redis).
     */
    async function appendSuspects(inbox: WebhookInbox, ...texts: string[]): Promise<InboxDelivery[]> {
      const suspects = texts.map((text) => textDelivery(text))
      for (const suspect of suspects) await inbox.append(suspect)
      const taken = (await inbox.take(texts.length, 1)).map((e) => e.id)
      expect([...taken].sort()).toEqual(suspects.map((d) => d.id).sort())
      await sleep(20)
      return taken.map((id) => suspects.find((d) => d.id === id)!)
    }

    it('stop() while a handler runs: a suspect taken but waiting for it to end is handed back unrun, never started', async () => {
      const inbox = await fresh()
      const { first, worker, runs, releaseTakes, finishFirst } = await busyWorker(inbox)
      const [suspect] = await appendSuspects(inbox, 'suspect')
      const healthy = textDelivery('healthy')
      await inbox.append(healthy)
      releaseTakes()
      // Both taken: the healthy one runs beside the first, the suspect waits to run alone.
      await until(() => runs.includes(healthy.id) && worker.active === 2)
      const stopped = worker.stop()
      finishFirst()
      await stopped
      await sleep(100)
      expect(runs.sort()).toEqual([first.id, healthy.id].sort())
      // Handed back: due now, not after its 60 s lease.
      const again = await inbox.take(10, 1000)
      expect(again.map((e) => e.id)).toEqual([suspect!.id])
    })

    it('two suspects in one take: the second is given back at once, as an attempt and not a stall, never held while the first runs', async () => {
      const inbox = await fresh()
      const { first, worker, runs, releaseTakes, finishFirst } = await busyWorker(inbox)
      const [one, two] = await appendSuspects(inbox, 'suspect one', 'suspect two')
      releaseTakes()
      await until(async () => (await inbox.stats()).retrying === 1)
      // Due now for any worker, still one stall (the give-back counted an attempt); the first
      // suspect waits to run alone.
      // Which one is kept follows the inbox's order of the worker's take (on Redis, suspects due in
      // the same millisecond come by id): the test takes the other.
      const again = await inbox.take(10, 1000)
      expect(again).toHaveLength(1)
      const back = again[0]!
      expect([one!.id, two!.id]).toContain(back.id)
      expect(back).toMatchObject({ attempts: 1, takes: 3 })
      expect(await inbox.retry(back, 0, 'given back by the test')).toBe(true)
      const kept = back.id === one!.id ? two! : one!
      finishFirst()
      await until(() => runs.length === 3)
      await worker.stop()
      expect(runs).toEqual([first.id, kept.id, back.id])
    })

    it('stop() resolves only once the handlers it started have finished', async () => {
      const inbox = await fresh()
      for (let i = 0; i < 3; i++) await inbox.append(textDelivery(`slow ${i}`))
      let finished = 0
      const { worker, results } = testWorker(inbox, async () => {
        await sleep(300)
        finished++
      })
      worker.start()
      await until(() => worker.active === 3)
      await worker.stop()
      expect(finished).toBe(3)
      expect(results.map((r) => r.outcome)).toEqual(['processed', 'processed', 'processed'])
    })

    it('stop(timeoutMs) gives up after timeoutMs and aborts the signals of the handlers still running', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('stubborn'))
      let reason: unknown
      const { worker } = testWorker(inbox, (_text, signal) => new Promise<void>((resolve) => signal!.addEventListener('abort', () => resolve(void (reason = signal!.reason)))))
      worker.start()
      await until(() => worker.active === 1)
      await worker.stop(100)
      expect(reason).toMatchObject({ name: 'AbortError' })
    })

    it('an error holding U+0000, lone surrogates and 50 kB is stored clean and capped; the delivery backs off to the dead letters', async () => {
      const inbox = await fresh()
      const d = textDelivery('nul')
      await inbox.append(d)
      const { worker, runs, results } = testWorker(
        inbox,
        () => {
          throw new Error(`bad\u0000byte \uD800 ${'x'.repeat(50_000)}`)
        },
        { maxRetryAgeMs: 150 },
      )
      worker.start()
      await until(() => results.some((r) => r.outcome === 'dead'))
      await worker.stop()
      expect(results.map((r) => r.outcome)).toEqual([...Array(results.length - 1).fill('retrying'), 'dead'])
      // Backed off: 20, 40, 80 ms... within a 150 ms budget, a few runs, not one per poll.
      expect(runs.length).toBeLessThanOrEqual(5)
      const [letter] = await inbox.dead()
      expect(letter!.id).toBe(d.id)
      expect(letter!.lastError.startsWith('Error: badbyte  xxx')).toBe(true)
      expect(letter!.lastError.length).toBeLessThanOrEqual(2000)
      expect(letter!.lastError.includes('\u0000')).toBe(false)
      expect(letter!.lastError).not.toMatch(/[\uD800-\uDFFF]/)
    })

    it('a requeued dead letter gets a full retry budget: failing again, it is retrying, not dead at once', async () => {
      const inbox = await fresh()
      const d = textDelivery('requeue budget')
      await inbox.append(d)
      const { worker, results } = testWorker(
        inbox,
        () => {
          throw new Error('still failing')
        },
        { maxRetryAgeMs: 300 },
      )
      worker.start()
      await until(() => results.some((r) => r.outcome === 'dead'))
      const before = results.length
      // Requeued once maxRetryAgeMs has passed since it was received: only a budget counted from
      // the requeue lets it retry.
      await sleep(300)
      expect(await inbox.requeue(d.keys[0]!)).toBe(true)
      await until(() => results.length > before)
      await worker.stop()
      expect(results[before]).toMatchObject({ id: d.id, outcome: 'retrying', attempts: 1, retryInMs: 20 })
    })

    it('a throwing or rejecting onError and onResult end nothing: the worker goes on', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('hooks'))
      let takes = 0
      const flaky = wrap(inbox, {
        take: async (max, ms) => {
          if (++takes <= 2) throw new InboxError('unavailable', 'TestInbox.take', 'svc-webhooks: the inbox did not answer (test)')
          return inbox.take(max, ms)
        },
      })
      let results = 0
      const { worker, runs } = testWorker(flaky, () => {}, {
        onError: (error) => {
          if (takes === 1) throw error
          return Promise.reject(error)
        },
        onResult: () => {
          results++
          throw new Error('a logging hook that throws')
        },
      })
      worker.start()
      await until(() => results === 1)
      await worker.stop()
      expect(runs).toHaveLength(1)
      expect((await inbox.stats()).depth).toBe(0)
    })

    it('with a store, the claim outlasts a handler slower than the lease: an engine handing it out twice runs it once', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('claimed'))
      const [entry] = await inbox.take(1, 60_000)
      // An at-least-once engine: every take hands the same entry out again.
      const twice = wrap(inbox, { take: async () => [entry!], complete: async () => true, retry: async () => true, extend: async () => true })
      const store = new MemoryStore()
      let runs = 0
      const on = { 'message.received': async () => void (runs++, await sleep(400)) }
      const a = createInboxWorker({ inbox: twice, on, store, pollIntervalMs: 10, concurrency: 1, visibilityTimeoutMs: 100, log: false })
      a.start()
      await until(() => runs === 1)
      const b = createInboxWorker({ inbox: twice, on, store, pollIntervalMs: 10, concurrency: 1, visibilityTimeoutMs: 100, log: false })
      b.start()
      await sleep(300)
      await Promise.all([a.stop(), b.stop()])
      expect(runs).toBe(1)
    })
  })
}

/** The default log, over any inbox: what each fault leaves in it, and what never reaches it. */
export function describeWorkerLog(name: string, fresh: FaultInboxFactory): void {
  describe(`inbox worker log: ${name}`, () => {
    it('warns at start about an `on` key that is no event type, and about what the inbox says breaks durability', async () => {
      const inbox = await fresh()
      const lines: string[] = []
      const worker = createInboxWorker({
        inbox: wrap(inbox, { durabilityWarnings: async () => ['svc-webhooks: RedisInbox: appendonly is off (test).'] }),
        on: { 'message.recieved': () => {} } as never,
        log: (line) => void lines.push(line),
        pollIntervalMs: 10,
      })
      worker.start()
      await until(() => lines.length >= 2)
      await worker.stop()
      expect(lines.some((l) => l.includes('"message.recieved"') && l.includes('Did you mean "message.received"?'))).toBe(true)
      expect(lines.some((l) => l.includes('appendonly is off (test)'))).toBe(true)
    })

    it('a handler failure: a line on the first attempt, its repeats (every fifth) summarised per window; never the body or the message', async () => {
      const inbox = await fresh()
      const secretText = 'the body text that must not be logged'
      await inbox.append(textDelivery(secretText, { endpoint: 'tenant\nsvc-webhooks: forged line' }))
      const { worker, results, lines } = testWorker(
        inbox,
        (text) => {
          JSON.parse(text) // a SyntaxError quoting the body
        },
        { firstRetryDelayMs: 1, maxRetryDelayMs: 1, maxRetryAgeMs: 60_000 },
      )
      worker.start()
      await until(() => results.length >= 10)
      await worker.stop()
      // The first failure at once; the later ones of the window (attempts 5, 10...) counted into one summary.
      const failures = lines.filter((l) => l.includes('handler failed'))
      expect(failures.map((l) => Number(/attempt (\d+)/.exec(l)?.[1]))).toEqual([1])
      expect(failures[0]).toContain('SyntaxError')
      expect(lines.filter((l) => /inbox worker: handler_failed: \d+ more/.test(l))).toHaveLength(1)
      for (const line of lines) {
        expect(line).not.toContain(secretText.slice(0, 12))
        expect(line).not.toMatch(/[\n\r]/)
      }
      expect(failures[0]).toContain('tenant\\nsvc-webhooks: forged line')
    })

    it('an inbox that stops answering: one line when it stops, one when it is back, not one per poll', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('outage'))
      let takes = 0
      const down = wrap(inbox, {
        take: async (max, ms) => {
          if (++takes <= 5) throw new InboxError('unavailable', 'TestInbox.take', 'svc-webhooks: the inbox did not answer (test)')
          return inbox.take(max, ms)
        },
      })
      const { worker, results, lines } = testWorker(down, () => {}, { pollIntervalMs: 1 })
      worker.start()
      await until(() => results.length === 1)
      await worker.stop()
      expect(lines.filter((l) => l.includes('did not answer a take'))).toHaveLength(1)
      expect(lines.filter((l) => l.includes('answers again, after 5 failed take(s)'))).toHaveLength(1)
    })

    it('with no `log`, the lines go to console.warn: the `on` typo warning among them', async () => {
      const inbox = await fresh()
      const warn = console.warn
      const seen: string[] = []
      console.warn = (...args: unknown[]) => void seen.push(args.map(String).join(' '))
      try {
        const worker = createInboxWorker({ inbox, pollIntervalMs: 10, on: { 'message.recieved': () => {} } as never })
        // Startup warnings are written by start() itself.
        worker.start()
        await worker.stop()
      } finally {
        console.warn = warn
      }
      const typo = seen.filter((l) => l.includes('"message.recieved"'))
      expect(typo).toHaveLength(1)
      expect(typo[0]).toContain('Did you mean "message.received"?')
    })

    it('log: false silences every line', async () => {
      const inbox = await fresh()
      await inbox.append(textDelivery('quiet'))
      const warn = console.warn
      const seen: unknown[] = []
      console.warn = (...args: unknown[]) => void seen.push(args)
      try {
        const results: InboxWorkerResult[] = []
        const worker = createInboxWorker({ inbox, log: false, pollIntervalMs: 10, maxRetryAgeMs: 50, firstRetryDelayMs: 10, on: { 'message.recieved': () => {}, 'message.received': () => { throw new Error('x') } } as never, onResult: (r) => void results.push(r) })
        worker.start()
        await until(() => results.some((r) => r.outcome === 'dead'))
        await worker.stop()
      } finally {
        console.warn = warn
      }
      expect(seen).toEqual([])
    })
  })
}
