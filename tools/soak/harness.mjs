// @ts-check
// The fault-injecting soak with the handler in the request, shared by test/soak/soak.test.ts and
// `npm run soak` (scripts/soak.mjs; inbox-soak.mjs is the durable-inbox counterpart):
// exactly-once must hold across processes and through a store crash, which no single-process
// test can show. One real redis-server (append-only file, fsync always), N receiver processes
// (receiver.mjs) sharing it, the sender simulator (sender.mjs) sending to them at random,
// handlers failing ~10 % of the time, and Redis killed mid-run and started again `downMs` later
// (longer than the store's 2 s timeout, so receivers answer 503 meanwhile). The verdict comes from the handlers' own records: every delivery
// processed successfully exactly once, none lost, none twice, no permanent 4xx to a valid one.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedisServer } from '../redis.mjs'
import { startChild } from './processes.mjs'
import { simulateSender } from './sender.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const SECRET = 'svc_whsec_soak'

/** @typedef {'ioredis' | 'node-redis'} SoakClient */

/**
 * @typedef {object} SoakOptions
 * @property {number} [count] deliveries (distinct ids). Default 2000.
 * @property {number} [concurrency] deliveries in flight at once. Default 32.
 * @property {SoakClient[]} [clients] one receiver process per entry. Default ioredis, node-redis, ioredis.
 * @property {number} [failRate] share of handler runs that throw. Default 0.1.
 * @property {number} [duplicateRate] share of deliveries sent twice. Default 0.3.
 * @property {number} [restartAt] share of deliveries done when Redis is killed. Default 0.4.
 * @property {number} [downMs] how long Redis stays down. Default 2500.
 * @property {(line: string) => void} [log]
 */

/**
 * @typedef {{ client?: string, outcomes?: Record<string, number>, completeFailures?: number, error?: string }} ReceiverStats
 */

/**
 * The sender's figures and the verdict read from the handlers' records.
 *
 * @typedef {import('./sender.mjs').SenderFigures & {
 *   redisRestarted: boolean,
 *   downMs: number,
 *   failuresInjected: number,
 *   processed: number,
 *   lost: string[],
 *   doubled: string[],
 *   unknown: string[],
 *   answered2xxButNotProcessed: string[],
 *   receivers: ReceiverStats[],
 * }} SoakFigures
 */

/**
 * One receiver process (receiver.mjs) in handler mode, and its record file.
 *
 * @param {{ index: number, client: SoakClient, redisUrl: string, dir: string, failRate: number }} options
 */
function startReceiver({ index, client, redisUrl, dir, failRate }) {
  const recordFile = join(dir, `record-${index}.log`)
  const child = startChild({
    name: `receiver ${index}`,
    script: join(here, 'receiver.mjs'),
    env: { SOAK_REDIS_URL: redisUrl, SOAK_CLIENT: client, SOAK_RECORD: recordFile, SOAK_SECRET: SECRET, SOAK_FAIL_RATE: String(failRate) },
  })
  return {
    recordFile,
    ready: child.ready.then((port) => `http://127.0.0.1:${port}/`),
    /** @returns {Promise<ReceiverStats>} */
    stop: () => child.stop(),
  }
}

/**
 * Runs the soak and returns its figures; `figures.lost`, `figures.doubled` and
 * `figures.permanent` must all be empty for a pass.
 *
 * @param {SoakOptions} [options]
 * @returns {Promise<SoakFigures>}
 * @example
 * const figures = await runSoak({ count: 2000 })
 * if (figures.lost.length || figures.doubled.length) process.exit(1)
 */
export async function runSoak({
  count = 2000,
  concurrency = 32,
  clients = ['ioredis', 'node-redis', 'ioredis'],
  failRate = 0.1,
  duplicateRate = 0.3,
  restartAt = 0.4,
  downMs = 2500,
  log = () => {},
} = {}) {
  const redis = await startRedisServer({ persist: true })
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-soak-'))
  const receivers = clients.map((client, index) => startReceiver({ index, client, redisUrl: redis.url, dir, failRate }))
  /** @type {Promise<void> | undefined} */
  let restart
  try {
    const urls = await Promise.all(receivers.map((r) => r.ready))
    log(`soak: ${count} deliveries to ${urls.length} receivers (${clients.join(', ')}), Redis on ${redis.url}`)
    const { figures, ids, delivered } = await simulateSender({
      urls,
      secret: SECRET,
      count,
      concurrency,
      duplicateRate,
      onProgress(done) {
        if (restart === undefined && done >= Math.floor(count * restartAt)) {
          log(`soak: killing Redis after ${done} deliveries, restarting it ${downMs} ms later`)
          restart = redis.kill().then(() => new Promise((resolve) => setTimeout(resolve, downMs))).then(() => redis.start())
        }
      },
    })
    await restart
    const receiverStats = await Promise.all(receivers.map((r) => r.stop()))

    /** @type {Map<string, number>} */
    const okRuns = new Map()
    let failuresInjected = 0
    for (const { recordFile } of receivers) {
      for (const line of readFileSync(recordFile, 'utf8').split('\n')) {
        const [kind, id = ''] = line.split(' ')
        if (kind === 'ok') okRuns.set(id, (okRuns.get(id) ?? 0) + 1)
        else if (kind === 'fail') failuresInjected++
      }
    }
    const known = new Set(ids)
    return {
      ...figures,
      redisRestarted: restart !== undefined,
      downMs,
      failuresInjected,
      processed: [...okRuns.values()].reduce((a, b) => a + b, 0),
      lost: ids.filter((id) => !okRuns.has(id)),
      doubled: ids.filter((id) => (okRuns.get(id) ?? 0) > 1),
      unknown: [...okRuns.keys()].filter((id) => !known.has(id)),
      answered2xxButNotProcessed: [...delivered].filter((id) => !okRuns.has(id)),
      receivers: receiverStats,
    }
  } finally {
    await Promise.allSettled(receivers.map((r) => r.stop()))
    await redis.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
