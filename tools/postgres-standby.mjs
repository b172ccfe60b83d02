// @ts-check
// Postgres 15 primary + streaming standby on 127.0.0.1 for the failover tests and
// `npm run failover`: initdb, pg_basebackup of a running primary, the standby started on its own
// port, `synchronous_standby_names` naming it (synchronous) or not (asynchronous), and a TCP
// proxy in front (tools/tcp-proxy.mjs) that clients use, as they would use PgBouncer, HAProxy or
// a cloud endpoint that follows the primary. `failover()` is what an operator's night looks like:
// kill -9 of the primary's processes, `pg_ctl promote` of the standby, the proxy pointed at it.
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port.mjs'
import { findPostgresBinDir, killPostmaster, postgresSkipReason, postgresUid, runAsPostgres } from './postgres.mjs'
import { startTcpProxy } from './tcp-proxy.mjs'

const isRoot = userInfo().uid === 0
/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * @typedef {object} StandbyPair
 * @property {string} url the proxy's connection string: what the receiver's pool uses
 * @property {string} primaryUrl the primary's own connection string
 * @property {string} standbyUrl the standby's own connection string
 * @property {(promoteAfterMs?: number) => Promise<number>} failover kill -9 of the primary, the proxy moved to the standby, its promote `promoteAfterMs` (default 4000) later; resolves the time (performance.now) the new primary took writes
 * @property {() => Promise<void>} stop
 */

/**
 * @param {{ synchronous?: boolean }} [options] `synchronous` (default true): the primary waits for the standby on every commit
 * @returns {Promise<StandbyPair>}
 * @example
 * const pair = await startStandbyPair({ synchronous: true })
 * const pool = new Pool({ connectionString: pair.url })
 * await pair.failover()
 */
export async function startStandbyPair({ synchronous = true } = {}) {
  const reason = postgresSkipReason()
  if (reason) throw new Error(reason)
  const bin = /** @type {string} */ (findPostgresBinDir())
  const uid = isRoot ? postgresUid() : undefined
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-pg-standby-'))
  if (uid !== undefined) chownSync(dir, uid, -1)
  const primaryData = join(dir, 'primary')
  const standbyData = join(dir, 'standby')
  const primaryPort = await freePort()
  const standbyPort = await freePort()
  // Only the primary names a synchronous standby: the promoted standby has none of its own, and
  // naming one there would hold every commit after the promote (a second standby, or an
  // operator, would take that role in production).
  const options = (/** @type {number} */ port, /** @type {boolean} */ primary) =>
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on -c synchronous_commit=on` +
    ` -c synchronous_standby_names=${synchronous && primary ? 'standby1' : "''"}`
  /** @type {string[]} data dirs running now */
  const started = []
  const stopAll = async () => {
    for (const data of started) await runAsPostgres([join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'])
  }
  try {
    const init = await runAsPostgres([join(bin, 'initdb'), '-D', primaryData, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
    if (init.code !== 0) throw new Error(`initdb failed: ${init.output.slice(-500)}`)
    const start = async (/** @type {string} */ data, /** @type {number} */ port, /** @type {string} */ log) => {
      const result = await runAsPostgres([join(bin, 'pg_ctl'), '-D', data, '-o', options(port, data === primaryData), '-l', join(dir, log), '-w', '-t', '60', 'start'])
      if (result.code !== 0) throw new Error(`pg_ctl start failed: ${result.output.slice(-500)}`)
      started.push(data)
    }
    await start(primaryData, primaryPort, 'primary.log')
    const backup = await runAsPostgres([join(bin, 'pg_basebackup'), '-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standbyData, '-R', '-X', 'stream'])
    if (backup.code !== 0) throw new Error(`pg_basebackup failed: ${backup.output.slice(-500)}`)
    // The name synchronous_standby_names waits for.
    appendFileSync(standbyData + '/postgresql.auto.conf', `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres application_name=standby1'\n`)
    await start(standbyData, standbyPort, 'standby.log')
    const proxyPort = await freePort()
    const proxy = await startTcpProxy({ listenPort: proxyPort, targetPort: primaryPort })
    const url = (/** @type {number} */ port) => `postgres://postgres@127.0.0.1:${port}/postgres`
    // Bounded: up to 20 s for the standby to stream (and, synchronous, to be the sync standby).
    const { default: pg } = await import('pg')
    for (let i = 0; ; i++) {
      const client = new pg.Client({ connectionString: url(primaryPort) })
      await client.connect()
      const { rows } = await client.query('select sync_state from pg_stat_replication where state = $1', ['streaming'])
      await client.end()
      if (rows.length > 0 && (!synchronous || rows[0].sync_state === 'sync')) break
      if (i >= 200) throw new Error('the standby did not stream from the primary within 20 s')
      await sleep(100)
    }
    return {
      url: url(proxyPort),
      primaryUrl: url(primaryPort),
      standbyUrl: url(standbyPort),
      async failover(promoteAfterMs = 4000) {
        await killPostmaster(primaryData)
        started.splice(started.indexOf(primaryData), 1)
        // The proxy moves at once, as an endpoint that follows health checks might, while the
        // standby is still read-only: writes meet SQLSTATE 25006 until the promote, which comes
        // `promoteAfterMs` later, as an operator's or Patroni's detection would.
        proxy.retarget(standbyPort)
        await sleep(promoteAfterMs)
        const promoted = await runAsPostgres([join(bin, 'pg_ctl'), '-D', standbyData, '-w', '-t', '60', 'promote'])
        if (promoted.code !== 0) throw new Error(`pg_ctl promote failed: ${promoted.output.slice(-500)}`)
        return performance.now()
      },
      async stop() {
        await proxy.close()
        await stopAll()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  } catch (error) {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
}
