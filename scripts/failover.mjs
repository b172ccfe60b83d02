// @ts-check
// `npm run failover`: the failover experiment (tools/failover.mjs) on a real Sentinel set on
// 127.0.0.1, printed as the table of docs/topologies.md. Arguments pick the rows:
// `node scripts/failover.mjs kill:store kill:inbox partition:store partition:inbox` (Redis
// Sentinel; default: these four), `promote:store promote:inbox` (Postgres, synchronous standby),
// `promote-async:store promote-async:inbox` (asynchronous standby); `--count N --rate R` scale the run (default 400 at 50/s);
// `--replicate N` sets `replicas` on the Redis store and inbox, `--min-replicas N` sets
// min-replicas-to-write on every Redis node. For the "before" figures, run this script from a
// checkout of the previous commit with these tools copied in (docs/topologies.md).
import { runPostgresFailover, runRedisFailover } from '../tools/failover.mjs'

const args = process.argv.slice(2)
/** @param {string} name @param {number} fallback */
const flag = (name, fallback) => {
  const at = args.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(args[at + 1])
}
const count = flag('count', 400)
const rate = flag('rate', 50)
const replicate = flag('replicate', 0)
const minReplicas = flag('min-replicas', 0)
const rows = args.filter((a) => /^(kill|partition|promote|promote-async):(store|inbox)$/.test(a))
const picked = rows.length > 0 ? rows : ['kill:store', 'kill:inbox', 'partition:store', 'partition:inbox']

console.log(`| scenario | switch | max non-2xx in a row | permanent 4xx | lost | run twice (resend incl.) | resend non-2xx | slowest answer |`)
console.log('|---|---|---|---|---|---|---|---|')
for (const row of picked) {
  const [fault, path] = /** @type {['kill' | 'partition' | 'promote' | 'promote-async', 'store' | 'inbox']} */ (row.split(':'))
  const options = { path, count, rate, faultAt: Math.round(rate * 2) }
  const figures = fault.startsWith('promote') ? await runPostgresFailover({ ...options, synchronous: fault === 'promote' }) : await runRedisFailover({
    ...options,
    fault: /** @type {'kill' | 'partition'} */ (fault),
    ...(replicate > 0 ? { engine: { replicas: replicate } } : {}),
    ...(minReplicas > 0 ? { config: ['--min-replicas-to-write', String(minReplicas), '--min-replicas-max-lag', '2'] } : {}),
  })
  console.log(`| ${fault} ${path} | ${figures.switchMs ?? '-'} ms | ${figures.maxConsecutiveFailures} | ${figures.permanent} | ${figures.lost} | ${figures.twice} | ${figures.resendFailures} | ${figures.maxLatencyMs} ms |`)
}
