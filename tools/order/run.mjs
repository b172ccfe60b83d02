// A real ordering run across processes (DESIGN.md "Order within a conversation"): worker
// processes (tools/order/worker.mjs) on one RedisInbox or PostgresInbox, `conversations` ×
// `messages` message.received deliveries appended in a shuffled order while they run (as the
// sender's retries reorder them), handler failures at random, a few deliveries that always fail
// (dead-lettered, which must release their conversation), and one worker killed with SIGKILL
// mid-run. Returns what was recorded, checked against the rules (tools/order/check.mjs), and the
// figures. Used by test/inbox/ordering-processes.test.ts (scaled down), scripts/order-run.mjs
// (full size) and bench/order.mjs (throughput, no failures).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startChild } from '../soak/processes.mjs'
import { openInbox } from '../soak/engines.mjs'
import { byConversation, createInboxWorker } from 'svc-webhooks'
import { orderViolations } from './check.mjs'

const here = fileURLToPath(new URL('.', import.meta.url))
const encoder = new TextEncoder()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.timeOrigin + performance.now()

/** The body of message `index` of conversation `c`: created `index` seconds (and µs) after a fixed time. */
export function messageBody(c, index, tag = '') {
  const created = new Date(Date.UTC(2026, 4, 1, 10, 0, 0) + index * 1000).toISOString().replace('Z', '')
  return encoder.encode(
    JSON.stringify({
      business_id: 'b0000000-0000-4000-8000-000000000000',
      conversation_id: `${tag}conv-${c}`,
      event: 'message.received',
      message: { chat_id: `chat-${c}`, created_at: `${created}${String(index % 1000).padStart(3, '0')}+00:00`, from: '+15550000000', id: `msg-${c}-${index}`, sender_type: 'customer', text: `message ${index}` },
    }),
  )
}

/**
 * CPU a process has used so far (user + system, ms), read from /proc; with `children`, what its
 * children used too: those that ended and were waited for, and those still running (a Postgres
 * postmaster's backends, each a process of its own; differences between two readings then count
 * every child once, one that ends in between moving from the running ones to the waited-for
 * ones). Undefined where there is none (not Linux) or the process is gone. Not for redis-server,
 * whose only children are its snapshot forks: they come and go with the clock, not the work.
 *
 * @param {number | undefined} pid
 * @param {{ children?: boolean }} [options]
 * @returns {number | undefined}
 */
export function cpuMsOf(pid, { children = false } = {}) {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return undefined
  // Fields after the command (which may hold spaces): the parent is the 2nd; utime, stime, cutime
  // and cstime the 12th to 15th.
  const fieldsOf = (id) => readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
  const own = fieldsOf(pid)
  let ticks = Number(own[11]) + Number(own[12])
  if (children) {
    ticks += Number(own[13]) + Number(own[14])
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || Number(entry) === pid) continue
      try {
        const fields = fieldsOf(entry)
        if (Number(fields[1]) === pid) ticks += Number(fields[11]) + Number(fields[12])
      } catch {
        // Ended while the list was read: its CPU is in the parent's waited-for counts.
      }
    }
  }
  // Clock ticks are 100 per second on Linux.
  return Number.isFinite(ticks) ? ticks * 10 : undefined
}

/** A Fisher–Yates shuffle (in place). */
function shuffle(list) {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[list[i], list[j]] = [list[j], list[i]]
  }
  return list
}

/** ANALYZE every table of the database at `url`. */
async function analyzeTables(url) {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('ANALYZE')
  } finally {
    await client.end()
  }
}

/**
 * @param {{
 *   engine: 'redis' | 'postgres', url: string, conversations: number, messages: number, workers?: number,
 *   concurrency?: number, failRate?: number, poison?: number, kill?: boolean, ordered?: boolean, handlerMs?: number,
 *   visibilityMs?: number, timeoutMs?: number, shuffled?: boolean, maxRetryAgeMs?: number, prefill?: boolean,
 *   filed?: boolean, analyze?: boolean, connections?: number,
 * }} options
 *
 * `filed` (with `ordered`): the inboxes carry `ordering: byConversation`, so each append files its
 * delivery under its key and the workers take the ordering from their inbox; without it the
 * workers place every delivery. `analyze` (Postgres, with `prefill`): ANALYZE once the backlog is
 * in, the statistics autovacuum takes of a backlog that filled while the workers were paused.
 * `connections` (Postgres): the size of each worker process's pool (default 10).
 */
export async function runOrderedProcesses(options) {
  const { engine, url, conversations, messages, workers = 3, concurrency = 10, failRate = 0.1, poison = 0, kill = true, ordered = true, handlerMs = 2, visibilityMs = 2000, timeoutMs = 120_000, shuffled = true, maxRetryAgeMs = 4000, prefill = false, filed = false, analyze = false, connections } = options
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-order-'))
  const log = join(dir, 'runs.log')
  const { inbox, close } = await openInbox({ engine, url, ...(ordered && filed && { ordering: byConversation }) })
  const anyInbox = /** @type {any} */ (inbox)
  if (typeof anyInbox.ensureTable === 'function') await anyInbox.ensureTable()

  // A fresh tag per run: ids and conversations of an earlier run on the same inbox are not met again.
  const tag = `r${Math.random().toString(36).slice(2, 8)}-`
  /** @type {{ id: string, key: string, order: string, appendedAt: number, c: number, index: number }[]} */
  const planned = []
  for (let c = 0; c < conversations; c++) {
    for (let index = 0; index < messages; index++) planned.push({ id: `${tag}c${c}-m${index}`, key: `${tag}conv-${c}`, order: String(index).padStart(6, '0'), appendedAt: Infinity, c, index })
  }
  if (shuffled) shuffle(planned)
  // Poison: always failing, dead-lettered after the retry budget; never the last of a conversation,
  // so a later message shows that the dead letter released its key.
  const poisoned = new Set(planned.filter((p) => p.index < messages - 1).slice(0, poison).map((p) => p.id))

  const env = {
    ORDER_ENGINE: engine,
    ORDER_URL: url,
    ORDER_LOG: log,
    ORDER_ORDERED: ordered ? (filed ? 'filed' : '1') : '0',
    ORDER_FAIL_RATE: String(failRate),
    ORDER_POISON: [...poisoned].join(','),
    ORDER_CONCURRENCY: String(concurrency),
    ORDER_VISIBILITY_MS: String(visibilityMs),
    ORDER_HANDLER_MS: String(handlerMs),
    ORDER_MAX_RETRY_AGE_MS: String(maxRetryAgeMs),
    ORDER_CONNECTIONS: connections === undefined ? '' : String(connections),
  }
  const append = async (p) => {
    const receivedAt = Date.now()
    await inbox.append({ keys: [`default:${p.id}`], endpoint: 'default', id: p.id, timestamp: Math.floor(receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(p.c, p.index, tag), receivedAt })
    p.appendedAt = now()
  }
  // prefill (throughput): every delivery accepted while the workers are paused, timed from resume().
  const controller = createInboxWorker({ inbox, on: {}, log: false })
  if (prefill) {
    await controller.pause('the order run fills the inbox')
    for (let i = 0; i < planned.length; i += 200) await Promise.all(planned.slice(i, i + 200).map(append))
    if (analyze && engine === 'postgres') await analyzeTables(url)
  }
  const children = Array.from({ length: workers }, (_, i) => startChild({ name: `order worker ${i + 1}`, script: join(here, 'worker.mjs'), env }))
  let killedPid = -1
  let killAt = Infinity
  let finished = false
  /** @type {number} */
  let started
  /** @type {Record<string, unknown>[]} */
  let stopped
  try {
    await Promise.all(children.map((child) => child.ready))
    // Timed from the first append (or the resume): process start-up is not the inbox's throughput.
    started = now()
    if (prefill) await controller.resume()
    // Appended while the workers run, a slice at a time, in the shuffled order.
    const slice = Math.max(1, Math.ceil(planned.length / 40))
    for (let i = 0; i < planned.length && !prefill; i += slice) {
      await Promise.all(planned.slice(i, i + slice).map(append))
      if (kill && killedPid === -1 && i >= planned.length / 2) {
        killedPid = children[0].pid ?? -1
        killAt = now()
        await children[0].kill()
      }
      await sleep(5)
    }
    for (let waited = 0; waited < timeoutMs; waited += 50) {
      if ((await inbox.stats()).depth === 0) {
        finished = true
        break
      }
      await sleep(50)
    }
  } finally {
    stopped = await Promise.all(children.map((child) => child.stop()))
  }
  const durationMs = now() - started
  const dead = (await inbox.dead(1_000_000)).map((letter) => ({ id: letter.id, lastError: letter.lastError }))
  const stats = await inbox.stats()
  await close()
  let lines = []
  try {
    lines = readFileSync(log, 'utf8').split('\n').filter(Boolean)
  } catch {
    // No line at all: no worker ran anything (their errors are in the result).
  }
  rmSync(dir, { recursive: true, force: true })

  /** @type {Map<string, number>} the last take of each id per pid */
  const taken = new Map()
  /** @type {Map<string, { id: string, pid: number, start: number, end: number, ok: boolean, late: boolean, takenAt: number }>} */
  const open = new Map()
  /** @type {{ id: string, pid: number, start: number, end: number, ok: boolean, late: boolean, takenAt: number }[]} */
  const runs = []
  for (const line of lines) {
    const [kind, id, pidText, timeText, flag] = line.split(' ')
    const pid = Number(pidText)
    const time = Number(timeText)
    if (kind === 'T') taken.set(`${id} ${pid}`, time)
    else if (kind === 'S') open.set(`${id} ${pid}`, { id, pid, start: time, end: Infinity, ok: false, late: flag === '1', takenAt: taken.get(`${id} ${pid}`) ?? time })
    else if (kind === 'E') {
      const run = open.get(`${id} ${pid}`)
      if (!run) continue
      open.delete(`${id} ${pid}`)
      run.end = time
      run.ok = flag === '1'
      runs.push(run)
    }
  }
  // Runs the kill cut short: they ended when their process did.
  for (const run of open.values()) runs.push({ ...run, end: run.pid === killedPid ? killAt : run.end })
  // A run the killed worker finished but could not record is run again, as the inbox promises
  // (a handler keyed by the delivery id skips its effect then): counted apart, not as "twice".
  let rerunAfterKill = 0
  const lastOk = new Map()
  for (const run of [...runs].sort((a, b) => a.start - b.start)) {
    if (!run.ok) continue
    const before = lastOk.get(run.id)
    if (before && before.pid === killedPid) {
      before.ok = false
      rerunAfterKill++
    }
    lastOk.set(run.id, run)
  }
  const deliveries = planned.map(({ id, key, order, appendedAt }) => ({ id, key, order, appendedAt }))
  // `late` is checked as the rules say, except for runs right after the kill: the killed run may
  // have completed (raising the key's last order) without its E line being the one counted.
  const problems = orderViolations({ deliveries, runs, dead, strict: true, checkLate: !kill })
  const succeeded = new Set(runs.filter((r) => r.ok).map((r) => r.id))
  const twice = runs.filter((r) => r.ok).length - succeeded.size
  const deadIds = new Set(dead.map((d) => d.id))
  const lost = planned.filter((p) => !succeeded.has(p.id) && !deadIds.has(p.id)).length
  // After each poisoned (dead) delivery, the later messages of its conversation still ran.
  const released = [...poisoned].every((id) => {
    const p = planned.find((q) => q.id === id)
    return planned.filter((q) => q.c === p?.c && q.index > (p?.index ?? 0)).every((q) => succeeded.has(q.id) || deadIds.has(q.id))
  })
  return {
    finished,
    problems,
    workerErrors: stopped.map((s) => s.error).filter(Boolean),
    /** CPU the worker processes used, start-up included (undefined for one that printed none). */
    workerCpuMs: stopped.every((s) => typeof s.cpuMs === 'number') ? stopped.reduce((sum, s) => sum + s.cpuMs, 0) : undefined,
    figures: {
      deliveries: planned.length,
      conversations,
      workers,
      durationMs: Math.round(durationMs),
      /** From the first append (or the resume) to the first handler start: with `prefill`, what placing the backlog delays. */
      firstStartMs: runs.length === 0 ? undefined : Math.round(Math.min(...runs.map((r) => r.start)) - started),
      perSecond: Math.round((planned.length / durationMs) * 1000),
      runs: runs.length,
      succeeded: succeeded.size,
      dead: dead.length,
      poisoned: poisoned.size,
      poisonedDead: [...poisoned].filter((id) => deadIds.has(id)).length,
      lost,
      twice,
      rerunAfterKill,
      late: runs.filter((r) => r.late).length,
      killed: killedPid !== -1,
      deadReleasedKeys: released,
      depthAfter: stats.depth,
    },
  }
}
