// @ts-check
// The inbox soak's "application database": what the handlers write, kept outside the worker
// processes so it survives their SIGKILL, and the record the verdict is read from.
//
// The handler is idempotent the way users are told to make it: its effect is keyed by the
// delivery id and applied in one atomic step with that key (Redis: SET NX and the effect in one
// script; Postgres: INSERT ... ON CONFLICT DO NOTHING and the effect in one statement). A worker
// killed after the effect but before the inbox heard of it makes the delivery run again; the
// guard then skips the effect. So two figures are read back, separately:
//
// - effects applied per id (`effects`): must be exactly 1 for every delivery (0 is lost, 2 is
//   "run twice" in the sense that matters to the user's data);
// - handler runs per id (`log`, one row per invocation in the order the database saw them): a
//   second successful run is a re-run, harmless thanks to the guard, and the verdict says why
//   it happened (the earlier run's worker was killed, or not).
//
// The downstream outage is a flag in the same database: while it is set, the write is refused and
// the handler throws, as it would with its database down.

/**
 * One handler invocation as the database saw it.
 *
 * @typedef {{ kind: 'ok' | 'fail' | 'down' | 'hang', id: string, pid: number, applied: boolean }} EffectLogRow
 */

/**
 * @typedef {object} Effects
 * @property {(id: string, pid: number) => Promise<boolean>} apply the handler's write, once per id:
 *   true when applied now, false when it already was; rejects (and logs 'down') during the outage.
 *   With `guard: false` the write is applied every time (a handler that is not idempotent).
 * @property {(id: string, pid: number) => Promise<void>} fail logs an injected handler failure
 * @property {(id: string, pid: number) => Promise<void>} hang logs an injected run that never settles
 * @property {(down: boolean) => Promise<void>} setDown starts or ends the downstream outage
 * @property {() => Promise<{ effects: Map<string, number>, log: EffectLogRow[] }>} read
 * @property {() => Promise<void>} close
 */

export class DownstreamUnavailable extends Error {
  constructor() {
    super('the database is unavailable (simulated downstream outage)')
    this.name = 'DownstreamUnavailable'
  }
}

// KEYS: none (prefix in ARGV[1], every key derives from it). ARGV: prefix, id, pid, mode
// ('apply' | 'unguarded' | 'fail'). One script: the outage check, the guard, the effect and the
// log row are atomic. 'unguarded' applies the effect with no guard: what a handler that is not
// idempotent does, to show the soak counts doubled effects when there are some.
const REDIS_SCRIPT = `local P = ARGV[1]
if ARGV[4] == 'fail' then
  redis.call('RPUSH', P .. 'log', 'fail ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' 0')
  return 'fail'
end
if redis.call('EXISTS', P .. 'down') == 1 then
  redis.call('RPUSH', P .. 'log', 'down ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' 0')
  return 'down'
end
if ARGV[4] == 'unguarded' or redis.call('SET', P .. 'done:' .. ARGV[2], ARGV[3], 'NX') then
  redis.call('HINCRBY', P .. 'effects', ARGV[2], 1)
  redis.call('RPUSH', P .. 'log', 'ok ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' 1')
  return 'applied'
end
redis.call('RPUSH', P .. 'log', 'ok ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' 0')
return 'already'`

/**
 * The effects on a Redis server (an ioredis client).
 *
 * @param {any} client a connected ioredis client
 * @param {{ prefix?: string, guard?: boolean }} [options]
 * @returns {Effects}
 */
export function redisEffects(client, { prefix = 'app:', guard = true } = {}) {
  /** @param {string} id @param {number} pid @param {string} mode */
  const run = (id, pid, mode) => /** @type {Promise<string>} */ (client.eval(REDIS_SCRIPT, 0, prefix, id, String(pid), mode))
  return {
    async apply(id, pid) {
      const result = await run(id, pid, guard ? 'apply' : 'unguarded')
      if (result === 'down') throw new DownstreamUnavailable()
      return result === 'applied'
    },
    async fail(id, pid) {
      await run(id, pid, 'fail')
    },
    async hang(id, pid) {
      await client.rpush(`${prefix}log`, `hang ${id} ${pid} 0`)
    },
    async setDown(down) {
      if (down) await client.set(`${prefix}down`, '1')
      else await client.del(`${prefix}down`)
    },
    async read() {
      /** @type {Record<string, string>} */
      const counts = await client.hgetall(`${prefix}effects`)
      const effects = new Map(Object.entries(counts).map(([id, n]) => [id, Number(n)]))
      /** @type {EffectLogRow[]} */
      const log = []
      const total = await client.llen(`${prefix}log`)
      // Read in pages, so a long run's log never has to fit one reply.
      for (let start = 0; start < total; start += 10_000) {
        for (const row of /** @type {string[]} */ (await client.lrange(`${prefix}log`, start, start + 9_999))) {
          const [kind, id = '', pid = '0', applied = '0'] = row.split(' ')
          log.push({ kind: /** @type {EffectLogRow['kind']} */ (kind), id, pid: Number(pid), applied: applied === '1' })
        }
      }
      return { effects, log }
    },
    async close() {
      client.disconnect()
    },
  }
}

const POSTGRES_TABLES = `CREATE TABLE IF NOT EXISTS soak_done (id text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS soak_effects (id text NOT NULL, pid integer NOT NULL);
CREATE TABLE IF NOT EXISTS soak_log (seq bigserial PRIMARY KEY, kind text NOT NULL, id text NOT NULL, pid integer NOT NULL, applied boolean NOT NULL);
CREATE TABLE IF NOT EXISTS soak_down (down boolean PRIMARY KEY);`

// One statement, so the outage check, the guard, the effect and the log row commit together.
// soak_effects has no unique key on purpose: an effect applied twice would show as two rows.
// $3: false applies the effect with no guard (a handler that is not idempotent).
const POSTGRES_APPLY = `WITH state AS (SELECT EXISTS (SELECT 1 FROM soak_down) AS down),
claimed AS (
  INSERT INTO soak_done (id) SELECT $1 WHERE NOT (SELECT down FROM state) AND $3::boolean
  ON CONFLICT (id) DO NOTHING RETURNING id
),
guard AS (
  SELECT id FROM claimed UNION ALL SELECT $1 WHERE NOT (SELECT down FROM state) AND NOT $3::boolean
),
effect AS (INSERT INTO soak_effects (id, pid) SELECT id, $2 FROM guard RETURNING 1),
logged AS (
  INSERT INTO soak_log (kind, id, pid, applied)
  SELECT CASE WHEN (SELECT down FROM state) THEN 'down' ELSE 'ok' END, $1, $2, EXISTS (SELECT 1 FROM guard)
  RETURNING 1
)
SELECT (SELECT down FROM state) AS down, EXISTS (SELECT 1 FROM guard) AS applied`

/**
 * The effects in Postgres tables (a pg Pool). Call `setup()` once before the workers start.
 *
 * @param {any} pool
 * @param {{ guard?: boolean }} [options]
 * @returns {Effects & { setup: () => Promise<void> }}
 */
export function postgresEffects(pool, { guard = true } = {}) {
  return {
    async setup() {
      await pool.query(POSTGRES_TABLES)
    },
    async apply(id, pid) {
      const { rows } = await pool.query(POSTGRES_APPLY, [id, pid, guard])
      if (rows[0].down) throw new DownstreamUnavailable()
      return rows[0].applied
    },
    async fail(id, pid) {
      await pool.query(`INSERT INTO soak_log (kind, id, pid, applied) VALUES ('fail', $1, $2, false)`, [id, pid])
    },
    async hang(id, pid) {
      await pool.query(`INSERT INTO soak_log (kind, id, pid, applied) VALUES ('hang', $1, $2, false)`, [id, pid])
    },
    async setDown(down) {
      await pool.query(down ? 'INSERT INTO soak_down VALUES (true) ON CONFLICT DO NOTHING' : 'DELETE FROM soak_down')
    },
    async read() {
      const counts = await pool.query('SELECT id, count(*)::int AS n FROM soak_effects GROUP BY id')
      const effects = new Map(counts.rows.map((/** @type {{ id: string, n: number }} */ r) => [r.id, r.n]))
      const rows = await pool.query('SELECT kind, id, pid, applied FROM soak_log ORDER BY seq')
      return { effects, log: rows.rows }
    },
    async close() {
      await pool.end()
    },
  }
}
