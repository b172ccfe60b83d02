// @ts-check
// `npm run failover`: the failover experiment (tools/failover.mjs) on a real Sentinel set on
// 127.0.0.1, printed as the table of docs/topologies.md. Arguments pick the rows:
// `node scripts/failover.mjs kill:store kill:inbox partition:store partition:inbox`
// (default: all four); `--count N --rate R` scale the run (default 400 at 50/s);
// `--before` runs with the settings the package had before (RedisStore/RedisInbox alone, the
// receiver's own wait at 5 s for the inbox) to print the "before" figures.
import { runRedisFailover } from '../tools/failover.mjs'

const args = process.argv.slice(2)
const flag = (name, fallback) => {
  const at = args.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(args[at + 1])
}
const count = flag('count', 400)
const rate = flag('rate', 50)
const replicate = flag('replicate', 0)
const minReplicas = flag('min-replicas', 0)
const rows = args.filter((a) => /^(kill|partition):(store|inbox)$/.test(a))
const picked = rows.length > 0 ? rows : ['kill:store', 'kill:inbox', 'partition:store', 'partition:inbox']

console.log(`| scenario | switch | max non-2xx in a row | permanent 4xx | lost | run twice (resend incl.) | resend non-2xx | slowest answer |`)
console.log('|---|---|---|---|---|---|---|---|')
for (const row of picked) {
  const [fault, path] = /** @type {['kill' | 'partition', 'store' | 'inbox']} */ (row.split(':'))
  const figures = await runRedisFailover({
    path,
    fault,
    count,
    rate,
    faultAt: Math.round(rate * 2),
    ...(replicate > 0 ? { engine: { replicas: replicate } } : {}),
    ...(minReplicas > 0 ? { config: ['--min-replicas-to-write', String(minReplicas), '--min-replicas-max-lag', '2'] } : {}),
  })
  console.log(`| ${fault} ${path} | ${figures.switchMs ?? '-'} ms | ${figures.maxConsecutiveFailures} | ${figures.permanent} | ${figures.lost} | ${figures.twice} | ${figures.resendFailures} | ${figures.maxLatencyMs} ms |`)
}
