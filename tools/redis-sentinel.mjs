// @ts-check
// A Redis Sentinel set on 127.0.0.1 for the failover tests, `npm run failover` and the benchmarks:
// a primary, `replicas` replicas and `sentinels` sentinels (redis-server 7 `--sentinel`), each a
// real process on a free port with its own temp dir. Faults are real too: `killPrimary()` is
// kill -9 of whichever node is the primary now; `partitionPrimary()` cuts the old primary off from
// its replicas and the sentinels while clients still reach it.
//
// How the partition works without iptables: the replicas and the sentinels reach the primary only
// through a small TCP proxy (tcp-proxy.mjs); clients are told the proxy's address by Sentinel and
// map it back to the primary's own port (ioredis `natMap`, see `clientOptions()`). Cutting the
// proxy drops every replica and sentinel link to the primary and refuses new ones, while the
// clients' direct connections stay up: the split brain Redis's docs describe. `heal()` restores
// the proxy; Sentinel then turns the old primary into a replica of the new one.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port.mjs'
import { findRedisServer, startRedisServer } from './redis.mjs'
import { startTcpProxy } from './tcp-proxy.mjs'

export const MASTER_NAME = 'svcmaster'

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * One command over a raw socket (inline protocol), its reply as text; undefined when the server
 * does not answer within `timeoutMs`.
 *
 * @param {number} port
 * @param {string} command
 * @param {number} [timeoutMs]
 * @returns {Promise<string | undefined>}
 */
export function rawCommand(port, command, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let reply = ''
    /** @param {string | undefined} value */
    const done = (value) => {
      socket.destroy()
      resolve(value)
    }
    socket.setTimeout(timeoutMs, () => done(undefined))
    socket.once('error', () => done(undefined))
    socket.once('connect', () => socket.write(`${command}\r\n`))
    socket.on('data', (data) => {
      reply += data.toString()
      // Enough for the replies read here: a status, an integer, a bulk string or an array of two bulk strings.
      if (/^[+\-:]/.test(reply) && reply.endsWith('\r\n')) return done(reply)
      if (reply.startsWith('$') && (reply.startsWith('$-1') || reply.split('\r\n').length >= 3)) return done(reply)
      if (reply.startsWith('*') && (reply.startsWith('*-1') || reply.split('\r\n').length >= 1 + 2 * Number(/^\*(\d+)/.exec(reply)?.[1] ?? 0))) done(reply)
    })
  })
}

/**
 * @typedef {object} SentinelSet
 * @property {string} name the monitored primary's name
 * @property {{ host: string, port: number }[]} sentinels
 * @property {import('./redis.mjs').RedisServer[]} nodes every data node; `nodes[0]` started as the primary
 * @property {() => Promise<number>} primaryPort the port Sentinel names as the primary now (a proxy's port is mapped back to its node's)
 * @property {() => import('./redis.mjs').RedisServer} primary the node that is primary now, as last read by `primaryPort()`
 * @property {() => object} clientOptions ioredis options for a client of this set (sentinels, name, natMap)
 * @property {() => Promise<number>} killPrimary kill -9 of the current primary; resolves the time (ms, performance.now) of the kill
 * @property {() => Promise<number>} partitionPrimary cut the current primary off from its replicas and the sentinels; resolves the time
 * @property {() => void} heal restore every cut link
 * @property {(port: number, timeoutMs: number) => Promise<number | undefined>} waitForRejoin resolves the time the node on `port` is a replica in sync again, or undefined past `timeoutMs`
 * @property {(fromPort: number, timeoutMs: number) => Promise<number | undefined>} waitForSwitch resolves the time (performance.now) Sentinel named another primary than `fromPort`, or undefined past `timeoutMs`
 * @property {() => Promise<void>} stop
 */

/**
 * Starts the set and waits until every sentinel knows every replica and the other sentinels.
 *
 * @param {{ replicas?: number, sentinels?: number, downAfterMs?: number, persist?: boolean, partitionable?: boolean, config?: string[], log?: (line: string) => void }} [options]
 *   `downAfterMs`: Sentinel's `down-after-milliseconds` (the failover then takes about that plus
 *   one to two seconds); `config`: extra options for every data node (e.g. `min-replicas-to-write`);
 *   `partitionable: false` links the nodes directly, without the proxies (a benchmark, where the
 *   proxies in this process would add their latency to every replication acknowledgement)
 * @returns {Promise<SentinelSet>}
 * @example
 * const set = await startSentinelSet({ replicas: 2 })
 * const client = new Redis(set.clientOptions())
 * const killedAt = await set.killPrimary()
 * const switchedAt = await set.waitForSwitch(oldPort, 20_000)
 */
export async function startSentinelSet({ replicas = 2, sentinels = 3, downAfterMs = 4000, persist = true, partitionable = true, config = [], log = () => {} } = {}) {
  const bin = findRedisServer()
  if (!bin) throw new Error('redis-server is not installed (apt-get install redis-server, or set REDIS_SERVER_BIN)')
  /** @type {import('./redis.mjs').RedisServer[]} */
  const nodes = []
  /** @type {Map<number, Awaited<ReturnType<typeof startTcpProxy>>>} proxy port → proxy in front of a node */
  const proxies = new Map()
  /** @type {Map<number, number>} proxy port → node port */
  const behind = new Map()
  /** @type {import('node:child_process').ChildProcess[]} */
  const sentinelProcs = []
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-sentinel-'))
  // Each data node is reached by the others and the sentinels through its own proxy, so any node
  // (the first primary or a promoted replica) can be partitioned. Replicas announce the proxy's
  // port, so Sentinel and the other nodes only ever learn the proxied address.
  async function startNode(/** @type {string[]} */ extra) {
    if (!partitionable) {
      const node = await startRedisServer({ persist, bin, config: ['--repl-diskless-sync-delay', '0', ...config, ...extra] })
      nodes.push(node)
      return node.port
    }
    const proxyPort = await freePort()
    // No diskless-sync delay: by default a primary waits 5 s for more replicas before the first
    // full sync, and a replica that never synced would be promoted empty.
    const node = await startRedisServer({ persist, bin, config: ['--replica-announce-ip', '127.0.0.1', '--replica-announce-port', String(proxyPort), '--repl-diskless-sync-delay', '0', ...config, ...extra] })
    const proxy = await startTcpProxy({ listenPort: proxyPort, targetPort: node.port })
    proxies.set(proxyPort, proxy)
    behind.set(proxyPort, node.port)
    nodes.push(node)
    return proxyPort
  }
  try {
    const primaryProxy = await startNode([])
    for (let i = 0; i < replicas; i++) await startNode(['--replicaof', '127.0.0.1', String(primaryProxy)])
    const sentinelPorts = []
    for (let i = 0; i < sentinels; i++) {
      const port = await freePort()
      const file = join(dir, `sentinel-${port}.conf`)
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primaryProxy} ${Math.floor(sentinels / 2) + 1}`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${downAfterMs}`,
          `sentinel failover-timeout ${MASTER_NAME} 4000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      )
      const proc = spawn(bin, [file, '--sentinel', '--loglevel', 'warning'], { stdio: ['ignore', 'ignore', 'pipe'] })
      proc.stderr?.on('data', (d) => log(`sentinel ${port}: ${d}`))
      sentinelProcs.push(proc)
      sentinelPorts.push(port)
    }
    process.once('exit', () => {
      for (const proc of sentinelProcs) proc.kill('SIGKILL')
    })
    // Bounded: up to 20 s for every sentinel to see every replica and its peers.
    for (let i = 0; ; i++) {
      const ready = await Promise.all(
        sentinelPorts.map(async (port) => {
          const reply = await rawCommand(port, `SENTINEL MASTER ${MASTER_NAME}`)
          if (!reply) return false
          const fields = reply.split('\r\n').filter((line) => !line.startsWith('$') && !line.startsWith('*'))
          const at = (/** @type {string} */ key) => Number(fields[fields.indexOf(key) + 1])
          return at('num-slaves') >= replicas && at('num-other-sentinels') >= sentinels - 1
        }),
      )
      if (ready.every(Boolean)) break
      if (i >= 200) throw new Error('the sentinels did not find every replica and each other within 20 s')
      await sleep(100)
    }
    // Bounded: up to 20 s for every replica's first sync.
    for (let i = 0; ; i++) {
      const links = await Promise.all(nodes.slice(1).map((node) => rawCommand(node.port, 'INFO replication')))
      if (links.every((info) => info?.includes('master_link_status:up'))) break
      if (i >= 200) throw new Error('the replicas did not sync with the primary within 20 s')
      await sleep(100)
    }
    const sentinelsList = sentinelPorts.map((port) => ({ host: '127.0.0.1', port }))
    let currentPrimary = nodes[0]
    /** @type {Set<number>} proxies cut now */
    const cut = new Set()

    async function masterProxyPort() {
      // Any sentinel that answers; bounded by the list.
      for (const { port } of sentinelsList) {
        const reply = await rawCommand(port, `SENTINEL GET-MASTER-ADDR-BY-NAME ${MASTER_NAME}`)
        const parts = reply?.split('\r\n') ?? []
        if (parts[0] === '*2') return Number(parts[4])
      }
      throw new Error('no sentinel answered')
    }

    /** @returns {Promise<number>} */
    async function primaryPort() {
      const proxied = await masterProxyPort()
      const port = behind.get(proxied) ?? proxied
      currentPrimary = nodes.find((node) => node.port === port) ?? currentPrimary
      return port
    }

    return {
      name: MASTER_NAME,
      sentinels: sentinelsList,
      nodes,
      primaryPort,
      primary: () => /** @type {import('./redis.mjs').RedisServer} */ (currentPrimary),
      clientOptions: () => ({
        sentinels: sentinelsList,
        name: MASTER_NAME,
        // Sentinel names the proxies; the receiver's client goes to each node directly, so a cut
        // proxy partitions the node from the set but not from the clients.
        natMap: Object.fromEntries([...behind].map(([proxy, port]) => [`127.0.0.1:${proxy}`, { host: '127.0.0.1', port }])),
      }),
      async killPrimary() {
        const port = await primaryPort()
        const node = nodes.find((n) => n.port === port)
        if (!node) throw new Error(`no node on port ${port}`)
        await node.kill()
        return performance.now()
      },
      async partitionPrimary() {
        const port = await primaryPort()
        const proxied = [...behind].find(([, p]) => p === port)?.[0]
        if (proxied === undefined) throw new Error(`no proxy in front of port ${port}`)
        proxies.get(proxied)?.cut()
        cut.add(proxied)
        return performance.now()
      },
      heal() {
        for (const proxied of cut) proxies.get(proxied)?.restore()
        cut.clear()
      },
      async waitForRejoin(port, timeoutMs) {
        const until = performance.now() + timeoutMs
        // Bounded by `timeoutMs`, 100 ms apart. Sentinel turns a returning old primary into a
        // replica some seconds after it reaches it again (it waits to see the role it reports).
        while (performance.now() < until) {
          const info = await rawCommand(port, 'INFO replication')
          if (info?.includes('role:slave') && info.includes('master_link_status:up')) return performance.now()
          await sleep(100)
        }
        return undefined
      },
      async waitForSwitch(fromPort, timeoutMs) {
        const until = performance.now() + timeoutMs
        // Bounded by `timeoutMs`, 50 ms apart.
        while (performance.now() < until) {
          try {
            if ((await primaryPort()) !== fromPort) return performance.now()
          } catch {
            // A sentinel that does not answer yet: ask again.
          }
          await sleep(50)
        }
        return undefined
      },
      async stop() {
        for (const proc of sentinelProcs) proc.kill('SIGKILL')
        for (const proxy of proxies.values()) await proxy.close()
        for (const node of nodes) await node.stop()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  } catch (error) {
    for (const proc of sentinelProcs) proc.kill('SIGKILL')
    for (const proxy of proxies.values()) await proxy.close()
    for (const node of nodes) await node.stop()
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
}
