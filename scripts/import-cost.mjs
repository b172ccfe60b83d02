#!/usr/bin/env node
// What loading an entry costs a Node.js process: the CPU time (user + system) `import()` of it
// takes in a fresh process, measured inside it: on a shared machine, wall time mostly measures
// the neighbours. Median of N processes, beside the peer `standardwebhooks`. `node scripts/import-cost.mjs [runs=21] [--check]` after a build.
// The target is 1.2 times the peer; --check exits 1 past the ceiling, 1.5 times, compared on each
// case's fastest run (the least disturbed): on a shared 2-core machine the ratio of two runs of
// the same build moves by about 0.1, so a check at the target itself would fail at random, while
// the ceiling still catches a return to the split build (about 1.9 times).
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const runs = Math.max(3, Math.min(201, Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 21)))
const TARGET_RATIO = 1.2
const MAX_RATIO = 1.5

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

/** Milliseconds the import in `load` takes in a fresh `node` process (an ES module). */
function once(load) {
  const code = `const t = process.cpuUsage(); ${load}; const d = process.cpuUsage(t); console.log((d.user + d.system) / 1000)`
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' })
  if (out.status !== 0) throw new Error(`${load}: ${out.stderr}`)
  return Number(out.stdout.trim())
}

const CASES = [
  ['svc-webhooks (ESM)', "await import('svc-webhooks')"],
  ['svc-webhooks (CommonJS)', "(await import('node:module')).createRequire(import.meta.url)('svc-webhooks')"],
  ['svc-webhooks/express (ESM)', "await import('svc-webhooks/express')"],
  ['standardwebhooks (peer)', "await import('standardwebhooks')"],
]

// Interleaved, one process per case per round, so a machine busy for a while slows every case
// alike; the minimum is the least disturbed run, the median the usual one.
const times = CASES.map(() => [])
for (let round = 0; round < runs; round++) CASES.forEach(([, load], i) => times[i].push(once(load)))
const rows = CASES.map(([name], i) => ({ name, min: Math.min(...times[i]), ms: median(times[i]) }))
const peerRow = rows.find((r) => r.name.startsWith('standardwebhooks'))
const peer = peerRow.ms
/** The files `import 'svc-webhooks'` loads: dist/index.js and the chunks it imports, transitively. */
function filesOf(entry) {
  const seen = new Set()
  const queue = [entry]
  while (queue.length > 0) {
    const file = queue.pop()
    if (seen.has(file)) continue
    seen.add(file)
    const text = readFileSync(new URL(`../dist/${file}`, import.meta.url), 'utf8')
    for (const m of text.matchAll(/(?:from|import) "\.\/([^"]+)"/g)) queue.push(m[1])
  }
  return seen.size
}
const chunks = filesOf('index.js')
console.log(`CPU time of import() in a fresh process, ${runs} runs each; import 'svc-webhooks' loads ${chunks} file${chunks === 1 ? '' : 's'} of dist/ besides #crypto's`)
console.log(`${''.padEnd(28)} ${'median'.padStart(8)} ${'ratio'.padStart(6)} ${'min'.padStart(8)} ${'ratio'.padStart(6)}`)
for (const r of rows) console.log(`${r.name.padEnd(28)} ${r.ms.toFixed(1).padStart(5)} ms ${(r.ms / peer).toFixed(2).padStart(5)}x ${r.min.toFixed(1).padStart(5)} ms ${(r.min / peerRow.min).toFixed(2).padStart(5)}x`)
const ours = rows[0].min
const ratio = ours / peerRow.min
console.log(`svc-webhooks (ESM) at ${ratio.toFixed(2)}x the peer (fastest runs): target ${TARGET_RATIO}x${ratio <= TARGET_RATIO ? ', met' : ', not met'}; ceiling ${MAX_RATIO}x`)
if (process.argv.includes('--check') && ratio > MAX_RATIO) {
  console.error(`import cost: svc-webhooks ${ours.toFixed(1)} ms is over ${MAX_RATIO}x standardwebhooks' ${peerRow.min.toFixed(1)} ms (fastest runs): find what the core newly loads`)
  process.exit(1)
}
