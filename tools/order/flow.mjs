// Flow control across worker processes (DESIGN.md "Flow control"), on one RedisInbox or
// PostgresInbox: the shared rate limit (3 worker processes with `rateLimit`, handler starts
// counted per second) and the pause (one call stops every worker; a receiver keeps answering 202;
// everything runs after resume()). Used by test/inbox/flow-processes.test.ts (short) and
// scripts/flow-run.mjs (the 20 s measurement). Worker processes are tools/order/worker.mjs.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createInboxWorker, createWebhookReceiver } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { startChild } from '../soak/processes.mjs'
import { openInbox } from '../soak/engines.mjs'
import { messageBody } from './run.mjs'

const here = fileURLToPath(new URL('.', import.meta.url))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.timeOrigin + performance.now()
const SECRET = 'svc_whsec_flow_run'

async function setUp(engine, url, env, workers) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-flow-'))
  const log = join(dir, 'runs.log')
  const { inbox, close } = await openInbox({ engine, url })
  if (typeof inbox.ensureTable === 'function') await inbox.ensureTable()
  const children = Array.from({ length: workers }, (_, i) =>
    startChild({ name: `flow worker ${i + 1}`, script: join(here, 'worker.mjs'), env: { ORDER_ENGINE: engine, ORDER_URL: url, ORDER_LOG: log, ORDER_FAIL_RATE: '0', ORDER_HANDLER_MS: '1', ...env } }),
  )
  await Promise.all(children.map((child) => child.ready))
  const lines = () => {
    try {
      return readFileSync(log, 'utf8').split('\n').filter(Boolean)
    } catch {
      return []
    }
  }
  const finish = async () => {
    await Promise.all(children.map((child) => child.stop()))
    await close()
    rmSync(dir, { recursive: true, force: true })
  }
  return { inbox, lines, finish }
}

async function appendMany(inbox, count, tag) {
  for (let i = 0; i < count; i += 200) {
    await Promise.all(
      Array.from({ length: Math.min(200, count - i) }, (_, j) => {
        const id = `${tag}-${i + j}`
        const receivedAt = Date.now()
        return inbox.append({ keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(i + j, 0), receivedAt })
      }),
    )
  }
}

/**
 * Handler starts per second across `workers` processes with `rateLimit: { perSecond }`, over
 * `seconds` after a one-second warm-up, with a backlog far larger than the rate can drain.
 *
 * @param {{ engine: 'redis' | 'postgres', url: string, perSecond: number, seconds: number, workers?: number }} options
 */
export async function measureRate({ engine, url, perSecond, seconds, workers = 3 }) {
  const { inbox, lines, finish } = await setUp(engine, url, { ORDER_RATE: String(perSecond), ORDER_ORDERED: '0', ORDER_CONCURRENCY: '10' }, workers)
  try {
    await appendMany(inbox, Math.ceil(perSecond * (seconds + 3) * 1.5) + 100, 'rate')
    const from = now() + 1000
    const to = from + seconds * 1000
    await sleep(to - now() + 200)
    const starts = lines().filter((line) => line.startsWith('S ')).map((line) => Number(line.split(' ')[3]))
    const inWindow = starts.filter((t) => t >= from && t < to).length
    const pids = new Set(lines().filter((line) => line.startsWith('S ')).map((line) => line.split(' ')[2]))
    const stats = await inbox.stats()
    return { perSecond, measured: inWindow / seconds, seconds, workersStarting: pids.size, statsRate: stats.rateLimitPerSecond }
  } finally {
    await finish()
  }
}

/**
 * Pause across workers: deliveries flowing, `pause('deploy by ci')` from another process's
 * worker object, more deliveries posted to a receiver meanwhile (its answers counted), then
 * `resume()`; says when each handler started relative to the pause.
 *
 * @param {{ engine: 'redis' | 'postgres', url: string, workers?: number, pausedMs?: number }} options
 */
export async function runPause({ engine, url, workers = 3, pausedMs = 1500 }) {
  const { inbox, lines, finish } = await setUp(engine, url, { ORDER_ORDERED: '0', ORDER_CONCURRENCY: '4', ORDER_HANDLER_MS: '5' }, workers)
  try {
    await appendMany(inbox, 300, 'before')
    await sleep(150)
    // The worker object that pauses runs no handler: it only writes the engine's flag.
    const controller = createInboxWorker({ inbox, on: {}, log: false })
    await controller.pause('deploy by ci')
    const pausedAt = now()
    const statsPaused = await inbox.stats()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox, log: false })
    const statuses = []
    const postedIds = []
    for (let i = 0; i < 50; i++) {
      const id = crypto.randomUUID()
      postedIds.push(id)
      const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id })
      statuses.push((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status)
    }
    await sleep(pausedMs)
    const resumedAt = now()
    await controller.resume()
    let depth = -1
    for (let waited = 0; waited < 60_000; waited += 50) {
      depth = (await inbox.stats()).depth
      if (depth === 0) break
      await sleep(50)
    }
    const all = lines()
    const starts = all.filter((line) => line.startsWith('S ')).map((line) => ({ id: line.split(' ')[1], at: Number(line.split(' ')[3]) }))
    const ran = new Set(starts.map((s) => s.id))
    return {
      startsWhilePaused: starts.filter((s) => s.at > pausedAt + 50 && s.at < resumedAt).length,
      startsBeforePause: starts.filter((s) => s.at <= pausedAt).length,
      startsAfterResume: starts.filter((s) => s.at >= resumedAt).length,
      statuses,
      statsPaused,
      depthAfter: depth,
      missing: [...postedIds, ...Array.from({ length: 300 }, (_, i) => `before-${i}`)].filter((id) => !ran.has(id)).length,
    }
  } finally {
    await finish()
  }
}
