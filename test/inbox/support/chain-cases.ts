/**
 * The cases of `completeNext` every engine that has it must pass (ordering-redis-chain.test.ts,
 * ordering-postgres-chain.test.ts), on an inbox filing by conversation whose conversation 1 holds
 * messages `d0-1` .. `d<n-1>-1`.
 */
import { expect } from 'vitest'
import { byConversation, createInboxWorker, type OrderedEntry, type OrderingEngine, type WebhookInbox } from 'svc-webhooks'
import { messageBody } from '../../../tools/order/run.mjs'
import { delivery } from './ordering-run.js'

type ChainingInbox = WebhookInbox & OrderingEngine & Required<Pick<OrderingEngine, 'completeNext'>>
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * From `first`, each completion hands out the next message, in order, until none is left; then
 * the inbox is empty and a message sent again is a duplicate. `check` runs before each completion.
 */
export async function chainThrough(inbox: ChainingInbox, first: OrderedEntry, count: number, check?: (entry: OrderedEntry) => Promise<void>): Promise<void> {
  let entry: OrderedEntry | undefined = first
  const ran: string[] = []
  while (entry) {
    ran.push(entry.id)
    await check?.(entry)
    const { done, next }: { done: boolean; next?: OrderedEntry } = await inbox.completeNext(entry, 60_000, true)
    expect(done).toBe(true)
    if (next) {
      expect(next.orderKey).toBe(entry.orderKey)
      expect(next.late).toBe(false)
      expect(next.takes).toBe(1)
    }
    entry = next
  }
  expect(ran).toEqual(Array.from({ length: count }, (_, i) => `d${i}-1`))
  expect((await inbox.stats()).depth).toBe(0)
  // Completed: the sender's next try of one is a duplicate.
  expect(await inbox.append(delivery('d1-1', messageBody(1, 1), Date.now()))).toBe('duplicate')
}

/**
 * Records what `inbox` hands out from now on: the ids of the heads its ordered takes bring, and of
 * the next heads its completions bring.
 */
function recordHandOuts(inbox: ChainingInbox): { taken: string[]; chained: string[] } {
  const taken: string[] = []
  const chained: string[] = []
  const takeOrdered = inbox.takeOrdered.bind(inbox)
  inbox.takeOrdered = async (...args) => {
    const take = await takeOrdered(...args)
    taken.push(...take.run.map((entry) => entry.id))
    return take
  }
  const completeNext = inbox.completeNext.bind(inbox)
  inbox.completeNext = async (...args) => {
    const done = await completeNext(...args)
    if (done.next) chained.push(done.next.id)
    return done
  }
  return { taken, chained }
}

/**
 * A worker runs the conversation's 40 messages in order, three of them handed out by takes
 * (0, 17 and 34): each of the 16 after them came with a completion.
 */
export async function workerChainsSixteen(inbox: ChainingInbox): Promise<void> {
  const { taken } = recordHandOuts(inbox)
  const ran: string[] = []
  const worker = createInboxWorker({ inbox, pollIntervalMs: 5, log: false, on: { 'message.received': async (_event, d) => void ran.push(d.id) } })
  worker.start()
  for (let i = 0; i < 1000 && ran.length < 40; i++) await sleep(10)
  await worker.stop()
  expect(ran).toEqual(Array.from({ length: 40 }, (_, i) => `d${i}-1`))
  expect(taken).toHaveLength(3)
}

/**
 * Two writers at once: the completion of `first` (which may hand out the key's next head) and
 * four ordered takes race on separate connections; the next head goes to exactly one of them.
 */
export async function raceWithTakes(inbox: ChainingInbox, first: OrderedEntry, take: () => Promise<{ run: OrderedEntry[] }>): Promise<void> {
  const [done, ...takes] = await Promise.all([inbox.completeNext(first, 60_000, true), take(), take(), take(), take()])
  expect(done.done).toBe(true)
  const handed = [...(done.next ? [done.next.id] : []), ...takes.flatMap((taken) => taken.run.map((entry) => entry.id))]
  // Handed by the completion, or (when a take locked the key first) by a take: once either way.
  if (handed.length === 0) handed.push(...(await take()).run.map((entry) => entry.id))
  expect(handed).toEqual(['d1-1'])
}

/**
 * The engine's server killed right after a chained message ran, and started again 3 s later: an
 * ordered worker goes through the conversation's 8 messages (`d0-1` .. `d7-1`, appended) in order,
 * each once; the completion of d3-1 is retried across the restart and brings d4-1, so only d0-1
 * comes by a take (a completion given up would leave d3-1 to be taken again once its lease ran out).
 */
export async function restartMidChain(inbox: ChainingInbox, server: { kill: () => Promise<void>; start: () => Promise<void> }): Promise<void> {
  const { taken, chained } = recordHandOuts(inbox)
  const ran: string[] = []
  let restarted: Promise<void> | undefined
  const visibilityTimeoutMs = 8000
  const worker = createInboxWorker({
    inbox,
    ordering: byConversation,
    pollIntervalMs: 20,
    visibilityTimeoutMs,
    log: false,
    on: {
      'message.received': async (_event, d) => {
        ran.push(d.id)
        // d3-1 came with d2-1's completion; its work is done, and the server goes down for 3 s before its completion.
        if (d.id === 'd3-1' && restarted === undefined) {
          await server.kill()
          restarted = sleep(3000).then(() => server.start())
        }
      },
    },
  })
  worker.start()
  try {
    for (let i = 0; i < 400 && ran.length < 8; i++) await sleep(50)
    await restarted
    // Past a lease: a message whose completion was given up would be taken and run again by now.
    await sleep(visibilityTimeoutMs + 1500)
  } finally {
    await worker.stop()
  }
  expect(ran).toEqual(Array.from({ length: 8 }, (_, i) => `d${i}-1`))
  expect(chained).toEqual(Array.from({ length: 7 }, (_, i) => `d${i + 1}-1`))
  expect(taken).toEqual(['d0-1'])
  expect((await inbox.stats()).depth).toBe(0)
}
