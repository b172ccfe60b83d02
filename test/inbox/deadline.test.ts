/**
 * A deadline never doubles a run (DESIGN.md "Outgrowing one node"): a handler past
 * `handlerTimeoutMs` that ignores its signal frees its slot, but its delivery's claim stays held
 * until it settles, so the retry meets `in_flight` and the handler never runs beside itself. When
 * the abandoned run succeeds, its success is recorded and the retry completes the delivery without
 * running it again. Over the inbox worker (with and without a `store`) and the Queues consumer
 * (called as Queues call it, a batch at a time); BullMQ's and pg-boss's own workers are in
 * test/engines/.
 */
import { describe, expect, it } from 'vitest'
import { MemoryInbox, MemoryStore, type InboxWorkerResult } from 'svc-webhooks'
import { createQueueConsumer, type QueueMessageLike } from 'svc-webhooks/cloudflare'
import { testWorker, textDelivery, until } from './worker-faults.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A handler that takes `ms` and ignores its signal, counting starts, ends and the most at once. */
function slowHandler(ms: number) {
  const counts = { started: 0, ended: 0, running: 0, mostAtOnce: 0 }
  const run = async () => {
    counts.started++
    counts.mostAtOnce = Math.max(counts.mostAtOnce, ++counts.running)
    await sleep(ms)
    counts.running--
    counts.ended++
  }
  return { counts, run }
}

describe('a handler past its deadline is not run again beside itself', () => {
  for (const withStore of [true, false]) {
    it(`inbox worker ${withStore ? 'with a MemoryStore' : 'without a store'}: handlerTimeoutMs 200, a handler taking 500 ms runs once, then the delivery completes`, async () => {
      const inbox = new MemoryInbox()
      const d = textDelivery('slow')
      await inbox.append(d)
      const slow = slowHandler(500)
      // Retries due 20 ms after a failure: on a claim released at the deadline they would start
      // beside the abandoned run, two and three at once.
      const { worker, results } = testWorker(inbox, () => slow.run(), { handlerTimeoutMs: 200, firstRetryDelayMs: 20, ...(withStore && { store: new MemoryStore() }) })
      worker.start()
      try {
        await until(async () => (await inbox.stats()).depth === 0, 3_000).catch(() => undefined)
        // Long enough for a run started late to be seen.
        await sleep(300)
      } finally {
        await worker.stop(1_000)
      }
      console.log(`[deadline] inbox worker ${withStore ? 'with a MemoryStore' : 'without a store'}: handler started ${slow.counts.started} time(s), ${slow.counts.mostAtOnce} at once`)
      expect(slow.counts).toEqual({ started: 1, ended: 1, running: 0, mostAtOnce: 1 })
      const outcomes = results.map((r) => r.outcome)
      expect(outcomes[0]).toBe('retrying')
      expect((results[0]!.error as Error).name).toBe('TimeoutError')
      expect(outcomes.slice(1, -1).every((o) => o === 'in_flight')).toBe(true)
      expect(outcomes.at(-1)).toBe('duplicate')
      expect(await inbox.stats()).toMatchObject({ depth: 0, dead: 0 })
    })
  }

  it('inbox worker: an abandoned run that fails releases the claim, and the retry runs the handler then', async () => {
    const inbox = new MemoryInbox()
    await inbox.append(textDelivery('fails late'))
    let started = 0
    let running = 0
    let mostAtOnce = 0
    const { worker, results } = testWorker(
      inbox,
      async () => {
        mostAtOnce = Math.max(mostAtOnce, ++running)
        try {
          if (++started === 1) {
            await sleep(400)
            throw new Error('failed after its deadline')
          }
        } finally {
          running--
        }
      },
      { handlerTimeoutMs: 200, firstRetryDelayMs: 20 },
    )
    worker.start()
    try {
      await until(() => results.some((r) => r.outcome === 'processed'), 3_000)
    } finally {
      await worker.stop(1_000)
    }
    expect(started).toBe(2)
    expect(mostAtOnce).toBe(1)
    expect(results.map((r) => r.outcome).filter((o) => o !== 'in_flight')).toEqual(['retrying', 'processed'])
  })

  it('Queues consumer: the message redelivered while the abandoned run still works meets in_flight; after its success, duplicate (acked unrun)', async () => {
    const store = new MemoryStore()
    const slow = slowHandler(500)
    const results: InboxWorkerResult[] = []
    const consume = createQueueConsumer({ on: { 'message.received': () => slow.run() }, store, handlerTimeoutMs: 200, log: false, onResult: (r) => void results.push(r) })
    const d = textDelivery('slow on a Queue')
    const body = { v: 1, keys: d.keys, endpoint: d.endpoint, id: d.id, timestamp: d.timestamp, signatureVersion: d.signatureVersion, secretIndex: 0, body: Buffer.from(d.rawBody).toString('base64'), receivedAt: d.receivedAt }
    const acks: string[] = []
    // The Queue hands the same message out again after each retry(), as Cloudflare Queues do.
    const deliver = (attempts: number) => {
      const message: QueueMessageLike = { id: 'm1', body, attempts, ack: () => void acks.push('ack'), retry: () => void acks.push('retry') }
      return consume({ queue: 'webhooks', messages: [message] })
    }
    await deliver(1)
    await deliver(2)
    await sleep(400)
    await deliver(3)
    expect(slow.counts).toEqual({ started: 1, ended: 1, running: 0, mostAtOnce: 1 })
    expect(results.map((r) => r.outcome)).toEqual(['retrying', 'in_flight', 'duplicate'])
    expect(acks).toEqual(['retry', 'retry', 'ack'])
  })
})
