// @ts-check
// Starts a real 6-node Redis Cluster on 127.0.0.1 (3 primaries, 3 replicas, each node on a free
// port with its own temp dir) and kills a shard's primary with SIGKILL, so the suites can show
// what a failover does to keys, scripts and a sender's answers. A mock cannot: MOVED, "non local
// key" and a replica's promotion are the server's. Plain JS, like tools/redis.mjs, so the suites,
// the benchmarks and scripts load it as is. Needs redis-server and redis-cli 7.0 or later.
import { spawnSync } from 'node:child_process'
import { startRedisServer, findRedisServer } from './redis.mjs'
import { freePort } from './free-port.mjs'

/**
 * A running cluster.
 *
 * @typedef {object} RedisCluster
 * @property {{ host: string, port: number }[]} nodes Every node, as the clients' root nodes.
 * @property {(key: string) => number} slotOf The hash slot of a key (CRC16 of its hash tag, or of the key).
 * @property {(slot: number) => number} primaryOf The port of the node serving `slot` now.
 * @property {(slot: number) => Promise<{ killedPort: number, promotedPort: number, tookMs: number }>} killPrimary
 *   SIGKILL of the primary serving `slot`; resolves once a replica serves it and the cluster is ok.
 * @property {(slot: number) => Promise<{ killedPort: number }>} killPrimaryNow SIGKILL of that primary, without waiting for the failover.
 * @property {(timeoutMs?: number) => Promise<void>} waitUntilHealthy Until every live node says cluster_state:ok and agrees on the slots.
 * @property {() => Promise<void>} stop Stops every node and removes their temp dirs.
 */

/**
 * Why a cluster cannot be started here, or undefined when it can.
 *
 * @returns {string | undefined}
 */
export function redisClusterSkipReason() {
  if (!findRedisServer()) return 'redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN)'
  const cli = spawnSync(process.env.REDIS_CLI_BIN || 'redis-cli', ['--version'], { encoding: 'utf8' })
  return cli.status === 0 ? undefined : 'redis-cli is not installed (it comes with redis-server; or set REDIS_CLI_BIN)'
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * One redis-cli command against `port`; its stdout.
 *
 * @param {number} port
 * @param {string[]} args
 */
function cli(port, args) {
  const run = spawnSync(process.env.REDIS_CLI_BIN || 'redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 5_000 })
  return run.status === 0 ? run.stdout : ''
}

// CRC16/XMODEM, as Redis Cluster hashes keys (cluster specification, "Keys distribution model").
const CRC = new Uint16Array(256)
for (let i = 0; i < 256; i++) {
  let c = i << 8
  for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff
  CRC[i] = c
}

/**
 * The hash slot of `key`: the part between the first `{` and the next `}` when that is not
 * empty, else the whole key.
 *
 * @param {string} key
 */
export function slotOf(key) {
  let bytes = Buffer.from(key)
  const open = bytes.indexOf(0x7b)
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) bytes = bytes.subarray(open + 1, close)
  }
  let crc = 0
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ /** @type {number} */ (CRC[((crc >> 8) ^ b) & 0xff])
  return crc % 16384
}

/**
 * Starts 6 nodes and joins them: 3 primaries with one replica each. A node is declared failed
 * after `nodeTimeoutMs` (default 1000), so a killed primary's replica takes over within about
 * 2–4 s. `persist` as in startRedisServer (the append-only file with `appendfsync always`).
 *
 * @param {{ persist?: boolean, nodeTimeoutMs?: number }} [options]
 * @returns {Promise<RedisCluster>}
 * @example
 * const cluster = await startRedisCluster()
 * const client = new Redis.Cluster(cluster.nodes)
 * await cluster.killPrimary(cluster.slotOf('{svc-webhooks:inbox}:due'))
 * await cluster.stop()
 */
export async function startRedisCluster({ persist = false, nodeTimeoutMs = 1000 } = {}) {
  /** @type {import('./redis.mjs').RedisServer[]} */
  const servers = []
  try {
    for (let i = 0; i < 6; i++) {
      const busPort = await freePort()
      servers.push(
        await startRedisServer({
          persist,
          config: ['--cluster-enabled', 'yes', '--cluster-port', String(busPort), '--cluster-node-timeout', String(nodeTimeoutMs), '--cluster-replica-validity-factor', '0', '--cluster-require-full-coverage', 'no'],
        }),
      )
    }
    const create = spawnSync(
      process.env.REDIS_CLI_BIN || 'redis-cli',
      ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    )
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${(create.stdout + create.stderr).slice(-800)}`)
  } catch (error) {
    for (const s of servers) await s.stop().catch(() => undefined)
    throw error
  }
  /** @type {Set<number>} */
  const dead = new Set()
  const live = () => servers.filter((s) => !dead.has(s.port))

  /**
   * The slot ranges a node says are served, and by whom.
   *
   * @param {number} port
   */
  function slotsSeenBy(port) {
    // CLUSTER SHARDS is 7.0+; CLUSTER SLOTS is simpler to read from redis-cli's plain output.
    return cli(port, ['--raw', 'CLUSTER', 'SLOTS']).trim()
  }

  /** @param {number} slot */
  function primaryOf(slot) {
    for (const s of live()) {
      const lines = cli(s.port, ['CLUSTER', 'NODES']).trim().split('\n')
      for (const line of lines) {
        const fields = line.split(' ')
        const flags = fields[2] ?? ''
        if (!flags.includes('master') || flags.includes('fail') || fields[7] !== 'connected') continue
        for (const range of fields.slice(8)) {
          const [from, to = from] = range.split('-').map(Number)
          if (slot >= /** @type {number} */ (from) && slot <= /** @type {number} */ (to)) return Number((fields[1] ?? '').split('@')[0]?.split(':')[1])
        }
      }
      return -1
    }
    return -1
  }

  async function waitUntilHealthy(timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const nodes = live()
      const ok = nodes.every((s) => /cluster_state:ok/.test(cli(s.port, ['CLUSTER', 'INFO'])))
      const views = new Set(nodes.map((s) => slotsSeenBy(s.port).split('\n').filter((l) => /^\d+$/.test(l)).join(',')))
      // A replica still loading its first copy could be promoted empty (the validity factor is 0):
      // healthy means every replica's link to its primary is up.
      const synced = nodes.every((s) => {
        const info = cli(s.port, ['INFO', 'replication'])
        return !/role:slave/.test(info) || /master_link_status:up/.test(info)
      })
      if (ok && synced && views.size === 1 && [0, 5461, 10923, 16383].every((slot) => nodes.some((s) => s.port === primaryOf(slot)))) return
      if (Date.now() > deadline) throw new Error('the Redis Cluster did not become healthy in time')
      await sleep(100)
    }
  }

  /** @param {number} slot */
  async function killPrimaryNow(slot) {
    const port = primaryOf(slot)
    const server = servers.find((s) => s.port === port)
    if (!server) throw new Error(`no live primary serves slot ${slot}`)
    dead.add(port)
    await server.kill()
    return { killedPort: port }
  }

  await waitUntilHealthy()
  return {
    nodes: servers.map((s) => ({ host: '127.0.0.1', port: s.port })),
    slotOf,
    primaryOf,
    killPrimaryNow,
    async killPrimary(slot) {
      const started = Date.now()
      const { killedPort } = await killPrimaryNow(slot)
      const deadline = started + 20_000
      for (;;) {
        const promoted = primaryOf(slot)
        if (promoted > 0 && promoted !== killedPort) {
          await waitUntilHealthy()
          return { killedPort, promotedPort: promoted, tookMs: Date.now() - started }
        }
        if (Date.now() > deadline) throw new Error(`no replica took over slot ${slot} in time`)
        await sleep(50)
      }
    },
    waitUntilHealthy,
    async stop() {
      for (const s of servers) await s.stop().catch(() => undefined)
    },
  }
}
