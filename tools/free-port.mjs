// @ts-check
// A free TCP port on 127.0.0.1, for servers that must be told their port up front (redis-server,
// Postgres, `next start`). Plain JS: the suites, tools/ and the soak's child processes use it.
import { createServer } from 'node:net'

/**
 * A free TCP port on 127.0.0.1 (asked from the kernel, then released).
 *
 * @returns {Promise<number>}
 * @example
 * const port = await freePort()
 */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address())
      server.close(() => resolve(port))
    })
  })
}
