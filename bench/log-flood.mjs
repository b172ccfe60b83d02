/**
 * `npm run bench:log-flood`: what forged traffic costs the victim's log. Runs the README's Quick
 * start `server.mjs` as pasted (the built package, installed in a temp project as npm lays it
 * out), sends it 2,000 forged deliveries (well-formed, fresh timestamps, signed with a secret it
 * does not hold) from 16 connections on 127.0.0.1, waits out the refusal window so its summary
 * line is counted too, and prints the lines and bytes the server wrote to stdout and stderr.
 *
 * Options: --show (the first and last lines), --deliveries 2000, --connections 16, --settle-ms 11000 (how long to keep reading the
 * server's output after the first refusal).
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SECRET = 'svc_whsec_local'

function option(name, fallback, max) {
  const i = process.argv.indexOf(name)
  const value = i === -1 ? fallback : Number(process.argv[i + 1])
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`bench:log-flood: ${name} takes 1 to ${max}`)
  return value
}

/** The Quick start's `server.mjs`, as the README shows it. */
function quickStart() {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const found = [...readme.matchAll(/^```js\n(\/\/ server\.mjs\n[\s\S]*?)^```$/gm)]
  if (found.length !== 1) throw new Error(`bench:log-flood: expected one \`// server.mjs\` block in README.md, found ${found.length}`)
  return found[0][1]
}

async function freePort() {
  const server = createServer()
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

async function main() {
  const deliveries = option('--deliveries', 2000, 100_000)
  const connections = option('--connections', 16, 256)
  const settleMs = option('--settle-ms', 11_000, 60_000)
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-log-flood-'))
  let child
  try {
    mkdirSync(join(dir, 'node_modules'))
    symlinkSync(ROOT, join(dir, 'node_modules/svc-webhooks'), 'dir')
    symlinkSync(join(ROOT, 'node_modules/express'), join(dir, 'node_modules/express'), 'dir')
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'log-flood', private: true, type: 'module' }))
    writeFileSync(join(dir, 'server.mjs'), quickStart())
    const port = await freePort()
    child = spawn(process.execPath, ['server.mjs'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SVC_WEBHOOK_SECRET: SECRET, PORT: String(port) } })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    const started = Date.now()
    while (!output.includes('receiving on')) {
      if (child.exitCode !== null || Date.now() - started > 20_000) throw new Error(`bench:log-flood: the server did not start:\n${output}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const before = output.length

    // A forged delivery: well-formed and fresh, signed with a secret the server does not hold.
    const forged = await signWebhook({ secret: 'svc_whsec_NotTheServersSecret', event: sampleEvent('message.received') })
    let sent = 0
    const statuses = {}
    const url = `http://127.0.0.1:${port}/webhooks/svc`
    const firstAt = Date.now()
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (sent < deliveries) {
          const n = sent++
          const headers = { ...forged.headers, 'svc-webhook-id': `forged-${n}`, 'svc-webhook-timestamp': String(Math.floor(Date.now() / 1000)) }
          const res = await fetch(url, { method: 'POST', headers, body: forged.body })
          await res.arrayBuffer()
          statuses[res.status] = (statuses[res.status] ?? 0) + 1
        }
      }),
    )
    const floodMs = Date.now() - firstAt
    while (Date.now() - firstAt < settleMs) await new Promise((resolve) => setTimeout(resolve, 100))
    const written = output.slice(before)
    const lines = written.split('\n').filter((line) => line !== '')
    const bytes = Buffer.byteLength(written)
    console.log(`${deliveries} forged deliveries in ${(floodMs / 1000).toFixed(1)} s (answers: ${JSON.stringify(statuses)})`)
    console.log(`server wrote ${lines.length} lines, ${bytes.toLocaleString('en-US')} bytes (${(bytes / deliveries).toFixed(1)} bytes per delivery) within ${settleMs / 1000} s of the first`)
    console.log(`lines mentioning "failing answers in a row": ${lines.filter((line) => line.includes('failing answers in a row')).length}`)
    if (process.argv.includes('--show')) console.log(`\n${(lines.length <= 6 ? lines : [...lines.slice(0, 3), '...', ...lines.slice(-3)]).join('\n')}`)
  } finally {
    child?.kill()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
