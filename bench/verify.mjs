/**
 * `npm run bench`: the cost of verifying one delivery, against the hardware floor and the peers,
 * for bodies of 400 B, 4 KiB and 64 KiB (mitata, pinned in devDependencies).
 *
 * Every implementation is measured in ONE process run, so the ratios compare like with like on a
 * noisy machine. By default the script runs itself three times (three child processes), takes the
 * median of each cell, prints the markdown table and writes docs/benchmarks.json and
 * docs/benchmarks.svg. `node bench/verify.mjs --runs 1` is a quick single run;
 * `--no-write` leaves docs/ alone.
 *
 * The floor is what any receiver must do, as receivers usually write it: decode the header's hex
 * signature, one node:crypto `createHmac` over `id.timestamp.` and the raw bytes (two `update`
 * calls, key imported once), and a timingSafeEqual. "floor + parse" adds the UTF-8 decode and
 * JSON.parse every user needs. The HMAC floor (bench/floor.mjs) is the same check in the cheapest
 * way known, the way this package's node:crypto build computes it: verifySignature is measured
 * against both. The WebCrypto build's floor (bench/floor.mjs `subtleFloor`) is what a WebCrypto
 * receiver must do: WebCrypto's HMAC takes one buffer, so `id.timestamp.` and the body are joined
 * before one `subtle.verify`; a bare `subtle.verify` over bytes already joined is kept as
 * information, a floor no receiver can reach.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { do_not_optimize, measure } from 'mitata'
import { renderChart } from './chart.mjs'
import { paddedEvent } from './deliveries.mjs'
import { createHmacFloor, hmacFloor, subtleFloor } from './floor.mjs'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SIZES = [400, 4096, 65536]
const ROUNDS = 5
/**
 * mitata options. The clock is the process's CPU time (user + system, every thread: GC helpers
 * and the libuv pool that runs WebCrypto included), not wall time: on a shared machine a
 * descheduled process would otherwise bill its waiting to whichever row was running. Its 1 µs
 * resolution is why every sample is a batch of 128 calls.
 */
const MEASURE = {
  now: () => {
    const { user, system } = process.cpuUsage()
    return (user + system) * 1e3
  },
  batch_threshold: Number.POSITIVE_INFINITY,
  batch_samples: 128,
  batch_unroll: 1,
  min_samples: 5,
  min_cpu_time: 100e6,
}
const args = process.argv.slice(2)
const flag = (name) => {
  const hit = args.find((a) => a === name || a.startsWith(`${name}=`))
  if (hit === undefined) return undefined
  return hit.includes('=') ? hit.slice(name.length + 1) : (args[args.indexOf(hit) + 1] ?? '')
}
const runs = Number(flag('--runs') ?? 3)
if (!Number.isInteger(runs) || runs < 1 || runs > 9) throw new Error('bench: --runs takes 1 to 9')
// `--only floor,verifySignature`: a quick look at a few rows while working on the hot path (implies --no-write).
const only = (flag('--only') ?? process.env.SVC_BENCH_ONLY)?.split(',')

/**
 * Rows of the table, in order. `floor` names the row a ratio is taken against; `kind` groups
 * rows in the chart. Peers verify their own scheme's equivalent of the same delivery.
 */
const ALL_ROWS = [
  { key: 'floor', label: 'floor: node:crypto createHmac + timingSafeEqual', kind: 'floor' },
  { key: 'floorParse', label: 'floor + JSON.parse', kind: 'floor' },
  { key: 'hmacFloor', label: 'HMAC floor: one-shot SHA-256 pair + constant-time compare', kind: 'floor', floor: 'floor' },
  // An async API's share of the floor: the same check from an async function, awaited by the harness.
  { key: 'hmacFloorAsync', label: 'HMAC floor, from an async function', kind: 'floor', floor: 'hmacFloor' },
  { key: 'verifySignature', label: 'svc-webhooks verifySignature (no parse)', kind: 'ours', floor: 'floor', target: 1.15 },
  // The same calls again, paired with the HMAC floor for their own ratio; once in the chart is enough.
  { key: 'verifySignatureVsHmac', label: 'svc-webhooks verifySignature (no parse)', kind: 'ours', floor: 'hmacFloorAsync', chart: false, target: 1.2 },
  { key: 'verifyWebhook', label: 'svc-webhooks verifyWebhook', kind: 'ours', floor: 'floorParse', target: 1.1 },
  { key: 'verifyWebhookHeaders', label: 'svc-webhooks verifyWebhook, Fetch Headers', kind: 'ours', floor: 'floorParse' },
  // Information only: WebCrypto's HMAC takes one buffer, so no receiver is handed these bytes pre-joined.
  { key: 'subtleVerify', label: 'bare crypto.subtle.verify over pre-joined bytes (key imported once)', kind: 'floor' },
  // The WebCrypto floor a receiver can reach: join prefix and body, decode the hex, one verify.
  { key: 'subtleJoinVerify', label: 'WebCrypto floor: join id.timestamp. + body, subtle.verify', kind: 'floor', floor: 'subtleVerify' },
  { key: 'webVerifySignature', label: 'svc-webhooks verifySignature, WebCrypto build', kind: 'ours', floor: 'subtleJoinVerify', target: 1.1 },
  // The same calls again, against the pre-joined bytes; once in the chart is enough.
  { key: 'webVerifySignatureVsPrejoined', label: 'svc-webhooks verifySignature, WebCrypto build', kind: 'ours', floor: 'subtleVerify', chart: false },
  { key: 'octokit', label: '@octokit/webhooks-methods verify (no parse)', kind: 'peer', floor: 'floor' },
  { key: 'stripe', label: 'stripe webhooks.constructEvent', kind: 'peer', floor: 'floorParse' },
  { key: 'stripeAsync', label: 'stripe webhooks.constructEventAsync', kind: 'peer', floor: 'floorParse' },
  { key: 'svix', label: 'svix Webhook.verify', kind: 'peer', floor: 'floorParse' },
  { key: 'standardwebhooks', label: 'standardwebhooks Webhook.verify', kind: 'peer', floor: 'floorParse' },
]
/** How the table names each row's floor. */
const FLOOR_NAMES = { floor: 'floor', floorParse: 'floor + parse', hmacFloor: 'HMAC floor', hmacFloorAsync: 'HMAC floor, async', subtleVerify: 'pre-joined subtle.verify', subtleJoinVerify: 'WebCrypto floor' }
const wanted = (row) => only.includes(row.key) || row.kind === 'floor'
export const ROWS = only ? ALL_ROWS.filter(wanted) : ALL_ROWS

if (process.env.SVC_BENCH_CHILD === '1') {
  process.stdout.write(JSON.stringify(await measureOnce()))
} else {
  await main()
}

async function main() {
  const results = []
  for (let run = 0; run < runs; run++) {
    console.error(`bench: run ${run + 1} of ${runs} (one process, every implementation)`)
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
      env: { ...process.env, SVC_BENCH_CHILD: '1', ...(only ? { SVC_BENCH_ONLY: only.join(',') } : {}) },
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 16 * 1024 * 1024,
      timeout: 15 * 60 * 1000,
    })
    if (child.status !== 0) throw new Error(`bench: run ${run + 1} failed (exit ${child.status ?? child.signal})`)
    results.push(JSON.parse(child.stdout.toString('utf8')))
  }
  const summary = summarize(results)
  const table = markdownTable(summary)
  console.log(`\n${summary.machine.cpu}, ${summary.machine.cores} cores, Node ${summary.machine.node}; median of ${runs} run(s)\n`)
  console.log(table)
  const misses = targetMisses(summary)
  console.log(misses.length === 0 ? '\nall targets met' : `\ntargets missed:\n${misses.map((m) => `- ${m}`).join('\n')}`)
  if (!args.includes('--no-write') && !only) {
    writeFileSync(join(ROOT, 'docs/benchmarks.json'), `${JSON.stringify({ ...summary, table }, null, 2)}\n`)
    writeFileSync(join(ROOT, 'docs/benchmarks.svg'), renderChart({ ...summary, rows: summary.rows.filter((row) => row.chart !== false) }))
    console.error('bench: wrote docs/benchmarks.json and docs/benchmarks.svg')
  }
}

/** The row a ratio is taken against: `floor` for the floor + parse row itself. */
function floorOf(row) {
  return row.floor ?? (row.key === 'floorParse' ? 'floor' : undefined)
}

/**
 * One process run: every implementation at every size. The machine is shared, so each size is
 * measured in ROUNDS interleaved rounds (every implementation once per round, starting from a
 * different one each time), and each ratio comes from a pair: the row's floor measured right
 * before the row. Returns per-round ns/op (mitata's median sample) and per-round ratios.
 */
async function measureOnce() {
  const impls = await loadImplementations()
  const cells = {}
  const ratios = {}
  for (const size of SIZES) {
    // Signed just before measuring this size so every timestamp stays inside every tolerance.
    const fixtures = await buildFixtures(size, impls)
    for (const row of ROWS) {
      if (fixtures[row.key] === undefined) throw new Error(`bench: no fixture for ${row.key}`)
      if ((await fixtures[row.key]()) !== true) throw new Error(`bench: ${row.key} did not verify the ${size}-byte delivery`)
      cells[`${row.key}@${size}`] = []
      ratios[`${row.key}@${size}`] = []
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < ROWS.length; i++) {
        const row = ROWS[(i + round * 5) % ROWS.length]
        const floor = floorOf(row)
        const floorNs = floor === undefined ? undefined : (await measure(fixtures[floor], MEASURE)).p50
        const ns = (await measure(fixtures[row.key], MEASURE)).p50
        cells[`${row.key}@${size}`].push(ns)
        ratios[`${row.key}@${size}`].push(row.key === 'floor' ? 1 : floorNs === undefined ? null : ns / floorNs)
      }
    }
    for (const row of ROWS) console.error(`  ${String(size).padStart(5)} B  ${row.label.padEnd(48)} ${fmt(median(cells[`${row.key}@${size}`]))}`)
  }
  const { cpus } = await import('node:os')
  return {
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.versions.node, platform: `${process.platform}-${process.arch}` },
    cells,
    ratios,
  }
}

async function loadImplementations() {
  const core = await import('svc-webhooks')
  const testing = await import('svc-webhooks/testing')
  const { Webhook: Svix } = await import('svix')
  const { Webhook: StandardWebhook } = await import('standardwebhooks')
  const { default: Stripe } = await import('stripe')
  const octokit = await import('@octokit/webhooks-methods')
  return { core, testing, web: await loadWebBuild(), Svix, StandardWebhook, stripe: new Stripe('sk_test_bench'), octokit }
}

/**
 * The built package as workerd and the Edge runtime run it: the core's WebCrypto build
 * (dist/index.web.js, what the `default` condition of package.json "exports" picks), bundled by esbuild.
 */
async function loadWebBuild() {
  const { build } = await import('esbuild')
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-bench-'))
  try {
    const outfile = join(dir, 'web.mjs')
    await build({
      entryPoints: [join(ROOT, 'dist/index.web.js')],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      outfile,
      logLevel: 'silent',
    })
    return await import(pathToFileURL(outfile).href)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Equivalent deliveries of `size` bytes for every implementation, and a check-and-run closure each. */
async function buildFixtures(size, { core, testing, web, Svix, StandardWebhook, stripe, octokit }) {
  const secret = `svc_whsec_${Buffer.from('bench-secret-32-bytes-long-----!').toString('base64url')}`
  const event = paddedEvent(size)
  const signed = await testing.signWebhook({ secret, event, schemes: ['v2', 'v1'] })
  // As Node's http module hands them over (and Express, Fastify, node:http adapters pass them on).
  const headers = { host: '127.0.0.1:3000', 'user-agent': 'svc-webhooks/1.0', 'content-length': String(size), ...signed.headers }
  const body = Buffer.from(signed.rawBody)
  const text = signed.body
  const options = { secret }
  const fetchHeaders = new Headers(headers)
  const checkCreateHmac = createHmacFloor(secret)
  const checkHmac = hmacFloor(secret)
  const floor = () =>
    checkCreateHmac(`${headers['svc-webhook-id']}.${headers['svc-webhook-timestamp']}.`, body, headers['svc-webhook-signature-v2'])

  const subtleKey = await crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify'])
  const signedBytes = Buffer.concat([Buffer.from(`${signed.id}.${signed.timestamp}.`, 'latin1'), body])
  const subtleSignature = Buffer.from(headers['svc-webhook-signature-v2'].slice(3), 'hex')
  const checkSubtle = subtleFloor(subtleKey, { reuse: true })

  const svixSecret = `whsec_${Buffer.from(secret).toString('base64')}`
  const svix = new Svix(svixSecret)
  const svixHeaders = { 'svix-id': signed.id, 'svix-timestamp': String(signed.timestamp), 'svix-signature': svix.sign(signed.id, new Date(signed.timestamp * 1000), text) }
  const standard = new StandardWebhook(Buffer.from(secret).toString('base64'))
  const standardHeaders = {
    'webhook-id': signed.id,
    'webhook-timestamp': String(signed.timestamp),
    'webhook-signature': standard.sign(signed.id, new Date(signed.timestamp * 1000), text),
  }
  const stripeHeader = stripe.webhooks.generateTestHeaderString({ payload: text, secret, timestamp: signed.timestamp })
  const octokitSignature = await octokit.sign(secret, text)

  const id = signed.id
  return {
    floor,
    hmacFloor: () => checkHmac(`${headers['svc-webhook-id']}.${headers['svc-webhook-timestamp']}.`, body, headers['svc-webhook-signature-v2']),
    hmacFloorAsync: async () => checkHmac(`${headers['svc-webhook-id']}.${headers['svc-webhook-timestamp']}.`, body, headers['svc-webhook-signature-v2']),
    floorParse: () => {
      if (!floor()) return false
      const parsed = JSON.parse(body.toString('utf8'))
      do_not_optimize(parsed)
      return parsed.event === 'message.received'
    },
    verifySignature: async () => (await core.verifySignature({ body, headers }, options)).id === id,
    verifySignatureVsHmac: async () => (await core.verifySignature({ body, headers }, options)).id === id,
    verifyWebhook: async () => (await core.verifyWebhook({ body, headers }, options)).event.event === 'message.received',
    verifyWebhookHeaders: async () =>
      (await core.verifyWebhook({ body, headers: fetchHeaders }, options)).event.event === 'message.received',
    subtleVerify: async () => crypto.subtle.verify('HMAC', subtleKey, subtleSignature, signedBytes),
    subtleJoinVerify: async () =>
      checkSubtle(`${headers['svc-webhook-id']}.${headers['svc-webhook-timestamp']}.`, body, headers['svc-webhook-signature-v2']),
    webVerifySignature: async () => (await web.verifySignature({ body, headers: fetchHeaders }, options)).id === id,
    webVerifySignatureVsPrejoined: async () => (await web.verifySignature({ body, headers: fetchHeaders }, options)).id === id,
    // Its API takes the payload as a string: given the decoded text (an advantage to it).
    octokit: async () => octokit.verify(secret, text, octokitSignature),
    stripe: () => stripe.webhooks.constructEvent(body, stripeHeader, secret).event === 'message.received',
    stripeAsync: async () => (await stripe.webhooks.constructEventAsync(body, stripeHeader, secret)).event === 'message.received',
    // svix 1.x verifies through standardwebhooks and returns the parsed payload.
    svix: () => svix.verify(body, svixHeaders).event === 'message.received',
    standardwebhooks: () => standard.verify(body, standardHeaders).event === 'message.received',
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * Per run: a cell's ns/op is the median of its rounds, its ratio the median of its paired
 * per-round ratios. Across runs: the median of the runs' figures.
 */
function summarize(results) {
  const rows = ROWS.map((row) => {
    const sizes = {}
    const hasRatio = row.key === 'floor' || floorOf(row) !== undefined
    for (const size of SIZES) {
      const cell = `${row.key}@${size}`
      const perRun = results.map((r) => ({ ns: median(r.cells[cell]), ratio: hasRatio ? median(r.ratios[cell]) : undefined }))
      sizes[size] = {
        ns: median(perRun.map((p) => p.ns)),
        ratio: hasRatio ? median(perRun.map((p) => p.ratio)) : undefined,
        runs: perRun,
      }
    }
    return { ...row, sizes }
  })
  return { date: new Date().toISOString(), runs: results.length, rounds: ROUNDS, sizes: SIZES, machine: results[0].machine, rows }
}

function fmt(ns) {
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(2)} µs`
  return `${ns.toFixed(0)} ns`
}

function sizeLabel(size) {
  return size >= 1024 ? `${size / 1024} KiB` : `${size} B`
}

function markdownTable(summary) {
  const head = `| implementation | ${summary.sizes.map((s) => `${sizeLabel(s)}: ns/op (× its floor)`).join(' | ')} |`
  const rule = `|---|${summary.sizes.map(() => '---:').join('|')}|`
  const lines = summary.rows.map((row) => {
    const cells = summary.sizes.map((s) => {
      const { ns, ratio } = row.sizes[s]
      return `${Math.round(ns).toLocaleString('en-US')}${ratio === undefined ? '' : ` (${ratio.toFixed(2)}×)`}`
    })
    const floorNote = row.floor ? ` *(vs ${FLOOR_NAMES[row.floor]})*` : ''
    return `| ${row.label}${floorNote} | ${cells.join(' | ')} |`
  })
  return [head, rule, ...lines].join('\n')
}

function targetMisses(summary) {
  const misses = []
  const byKey = Object.fromEntries(summary.rows.map((r) => [r.key, r]))
  for (const row of summary.rows) {
    for (const size of summary.sizes) {
      const { ratio } = row.sizes[size]
      if (row.target !== undefined && ratio > row.target) misses.push(`${row.key} at ${sizeLabel(size)}: ${ratio.toFixed(2)}× > ${row.target}×`)
      if (row.kind === 'peer') {
        const ours = row.floor === 'floor' ? byKey.verifySignature : byKey.verifyWebhook
        if (ours !== undefined && ours.sizes[size].ns >= row.sizes[size].ns) misses.push(`${ours.key} not faster than ${row.key} at ${sizeLabel(size)}`)
      }
    }
  }
  return misses
}
