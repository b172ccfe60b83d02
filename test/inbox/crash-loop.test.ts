/**
 * A poison delivery that takes its worker process down (an uncaught throw in a timer), with the
 * process restarted after each crash as a supervisor would, in a bounded loop: it costs at most
 * `maxStalledCount + 1` crashes, then sits in the dead letters with the reason, and every other
 * delivery (several running beside it when it first crashed) is processed.
 *
 * The inbox must outlive the worker process: a MemoryInbox in this process, which the worker
 * reaches over IPC (the worker is under test, not the engine), and a real redis-server and
 * Postgres.
 */
import { fork } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { MemoryInbox, type WebhookInbox } from 'svc-webhooks'
import type { PostgresInbox } from 'svc-webhooks/postgres'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startPostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer } from '../../tools/redis.mjs'
import { openInbox } from '../../tools/soak/engines.mjs'
import { textDelivery } from './worker-faults.js'

const here = dirname(fileURLToPath(import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Runs worker processes over `inbox` one after the other, each until it crashes or the inbox is
 * empty (at most `maxRuns`). The workers reach `inbox` over IPC, or the same engine at `url`.
 */
async function superviseCrashLoop(
  inbox: WebhookInbox,
  { maxRuns = 10, maxStalledCount = 3, engine = 'ipc', url = '', visibilityMs = 300, beforeRun = async (_run: number) => {} } = {},
) {
  const ran: string[] = []
  let crashes = 0
  for (let run = 0; run < maxRuns; run++) {
    await beforeRun(run)
    const child = fork(join(here, 'support/crash-worker.mjs'), [], {
      serialization: 'advanced', // the bodies (Uint8Array) cross as they are
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      env: { ...process.env, CRASH_ENGINE: engine, CRASH_URL: url, CRASH_VISIBILITY_MS: String(visibilityMs), CRASH_MAX_STALLED: String(maxStalledCount) },
    })
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.on('message', async (message: { n?: number; op?: keyof WebhookInbox; args?: unknown[]; ran?: string }) => {
      if (message.ran) return void ran.push(message.ran)
      if (message.n === undefined || !message.op) return
      // The child may crash while the answer is on its way: with a callback, a send into a closed
      // channel (EPIPE) is reported to it instead of thrown as the child's 'error'.
      const answer = (reply: object) => {
        if (child.connected) child.send(reply, () => undefined)
      }
      try {
        answer({ n: message.n, result: await (inbox[message.op] as (...args: unknown[]) => Promise<unknown>)(...(message.args ?? [])) })
      } catch (error) {
        answer({ n: message.n, error: String(error) })
      }
    })
    let done = false
    const empty = (async () => {
      for (let i = 0; i < 500 && !done; i++) {
        if ((await inbox.stats()).depth === 0) return true
        await sleep(20)
      }
      return false
    })()
    const first = await Promise.race([exited.then((code) => ({ exit: code })), empty.then((drained) => ({ drained }))])
    done = true
    if ('exit' in first) {
      crashes++
      continue
    }
    child.kill('SIGKILL')
    await exited
    if (first.drained) break
  }
  return { ran, crashes }
}

/** The poison, five healthy deliveries, the crash loop over `inbox`, and the verdict. */
async function poisonCrashLoop(inbox: WebhookInbox, engine: { engine?: string; url?: string } = {}) {
  const poison = textDelivery('poison')
  await inbox.append(poison)
  const others = Array.from({ length: 5 }, (_, i) => textDelivery(`healthy ${i}`))
  for (const d of others) await inbox.append(d)

  const { ran, crashes } = await superviseCrashLoop(inbox, { maxStalledCount: 3, ...engine })

  expect(crashes).toBeGreaterThanOrEqual(1)
  expect(crashes).toBeLessThanOrEqual(3 + 1)
  const dead = await inbox.dead()
  expect(dead.map((d) => d.id)).toEqual([poison.id])
  expect(dead[0]!.lastError).toMatch(/^handed out \d+ times without a result: the handler may be crashing the process$/)
  expect(await inbox.stats()).toMatchObject({ depth: 0, dead: 1 })
  for (const d of others) expect(ran).toContain(d.id)
}

/**
 * The poison in one batch with healthy deliveries, every time: each process first takes a
 * delivery alone (its cautious start), then what is due together. The healthy ones were running
 * beside the poison when it first crashed, so they are suspects too; from then on none may wait
 * taken, unstarted, while the poison runs alone, or each crash would count against it as well and
 * bury it after `maxStalledCount` crashes that were not its own. The leases outlast a process's
 * start, so the suspects come back in one batch.
 */
async function poisonInBatches(inbox: WebhookInbox) {
  const poison = textDelivery('poison')
  const others = Array.from({ length: 5 }, (_, i) => textDelivery(`healthy ${i}`))
  const { ran, crashes } = await superviseCrashLoop(inbox, {
    maxStalledCount: 3,
    visibilityMs: 1500,
    async beforeRun(run) {
      // Taken alone at the start of each process: what comes after is taken in batches.
      await inbox.append(textDelivery(`first of run ${run}`))
      if (run > 0) return
      await inbox.append(poison)
      for (const d of others) await inbox.append(d)
    },
  })

  expect(crashes).toBeGreaterThanOrEqual(1)
  expect(crashes).toBeLessThanOrEqual(3 + 1)
  const dead = await inbox.dead()
  expect(dead.map((d) => d.id)).toEqual([poison.id])
  expect(await inbox.stats()).toMatchObject({ depth: 0, dead: 1 })
  for (const d of others) expect(ran).toContain(d.id)
}

const TITLE = 'costs at most maxStalledCount + 1 crashes, is dead-lettered with the reason, and the others are processed'
const engineTitle = (name: string) => `${TITLE} (${name})`

describe('a poison delivery that crashes its worker process', () => {
  it(`${TITLE} (MemoryInbox over IPC)`, { timeout: 60_000 }, async () => {
    await poisonCrashLoop(new MemoryInbox())
  })

  it('taken in one batch with healthy deliveries, buries only itself: none waits taken while it runs alone (MemoryInbox over IPC)', { timeout: 90_000 }, async () => {
    await poisonInBatches(new MemoryInbox())
  })
})

describeWithRedis('a poison delivery that crashes its worker process, over RedisInbox', () => {
  it(engineTitle('RedisInbox'), { timeout: 60_000 }, async () => {
    const server = await startRedisServer()
    const { inbox, close } = await openInbox({ engine: 'redis', url: server.url })
    try {
      await poisonCrashLoop(inbox, { engine: 'redis', url: server.url })
    } finally {
      await close()
      await server.stop()
    }
  })
})

describeWithPostgres('a poison delivery that crashes its worker process, over PostgresInbox', () => {
  it(engineTitle('PostgresInbox'), { timeout: 90_000 }, async () => {
    const server = await startPostgresServer()
    const { inbox, close } = await openInbox({ engine: 'postgres', url: server.url })
    try {
      await (inbox as PostgresInbox).ensureTable()
      await poisonCrashLoop(inbox, { engine: 'postgres', url: server.url })
    } finally {
      await close()
      await server.stop()
    }
  })
})
