// @ts-check
// A TCP proxy on 127.0.0.1 that can be cut and restored: the partition of the failover tests
// without iptables (tools/redis-sentinel.mjs puts one in front of each Redis node for the other
// nodes and the sentinels). `cut()` destroys every open link and refuses new ones, as a network
// partition does to both ends; `restore()` accepts again. `retarget(port)` is a proxy in front of
// a database that follows its primary (PgBouncer, HAProxy, a cloud endpoint): tools/postgres-standby.mjs.
import { createServer, connect } from 'node:net'

/**
 * @param {{ listenPort: number, targetPort: number }} options
 * @returns {Promise<{ port: number, cut: () => void, restore: () => void, retarget: (port: number) => void, close: () => Promise<void> }>}
 * @example
 * const proxy = await startTcpProxy({ listenPort: 7001, targetPort: 6379 })
 * proxy.cut()      // every link through it dropped, new ones refused
 * proxy.restore()
 */
export async function startTcpProxy({ listenPort, targetPort }) {
  /** @type {Set<import('node:net').Socket>} */
  const sockets = new Set()
  let isCut = false
  let target = targetPort
  const server = createServer((client) => {
    if (isCut) {
      client.destroy()
      return
    }
    const upstream = connect({ host: '127.0.0.1', port: target })
    sockets.add(client)
    sockets.add(upstream)
    const drop = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', drop)
    upstream.on('error', drop)
    client.on('close', drop)
    upstream.on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(listenPort, '127.0.0.1', () => resolve(undefined))
  })
  return {
    port: listenPort,
    cut() {
      isCut = true
      for (const socket of sockets) socket.destroy()
      sockets.clear()
    },
    restore() {
      isCut = false
    },
    /** Points new links at `port` and drops the open ones, as a proxy that follows a promoted primary does. */
    retarget(port) {
      target = port
      for (const socket of sockets) socket.destroy()
      sockets.clear()
    },
    async close() {
      isCut = true
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(() => resolve(undefined)))
    },
  }
}
