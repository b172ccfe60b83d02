/**
 * svc-webhooks/next in a real Next.js server: examples/next is built once with `next build`
 * (Turbopack, offline) and served by `next start` on 127.0.0.1; the shared case table then runs
 * against the App Router handler on the Node.js runtime, on the Edge runtime, and against the
 * Pages Router helper. The package is copied into the example's node_modules as `npm install`
 * would lay it out, so the build resolves `svc-webhooks/next` and its `#crypto` condition exactly
 * as in a user's app.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cp, mkdir, readFile, readdir, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { CASE_SECRET, describeCaseTable, type CaseTarget } from '../support/case-table.js'

const repo = fileURLToPath(new URL('../..', import.meta.url))
const app = join(repo, 'examples/next')
const nextBin = join(repo, 'node_modules/next/dist/bin/next')
const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', SVC_WEBHOOK_SECRET: CASE_SECRET }

let server: ChildProcess | undefined
let serverLog = ''
let started: Promise<string> | undefined

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}

function run(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [nextBin, ...args], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk))
    child.stderr.on('data', (chunk: Buffer) => (out += chunk))
    child.once('error', reject)
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`next ${args[0]} exited ${code}:\n${out}`))))
  })
}

/** Installs the built package (package.json + dist/) into the example, builds it, starts it. */
async function startNext(): Promise<string> {
  const installed = join(app, 'node_modules/svc-webhooks')
  await rm(installed, { recursive: true, force: true })
  await mkdir(installed, { recursive: true })
  await cp(join(repo, 'package.json'), join(installed, 'package.json'))
  await cp(join(repo, 'dist'), join(installed, 'dist'), { recursive: true })
  const buildStarted = performance.now()
  await run(['build'])
  console.log(`next build: ${Math.round(performance.now() - buildStarted)} ms`)

  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  server = spawn(process.execPath, [nextBin, 'start', '-H', '127.0.0.1', '-p', String(port)], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] })
  server.stdout!.on('data', (chunk: Buffer) => (serverLog += chunk))
  server.stderr!.on('data', (chunk: Buffer) => (serverLog += chunk))
  for (let attempt = 0; attempt < 300; attempt++) {
    if (server.exitCode !== null) throw new Error(`next start exited ${server.exitCode}:\n${serverLog}`)
    const ready = await fetch(`${url}/node/runs`).then((res) => res.ok, () => false)
    if (ready) return url
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`next start did not answer within 300 attempts:\n${serverLog}`)
}

/** One server for every test in this file, started on first use; stopped in afterAll, not by the table. */
const baseUrl = () => (started ??= startNext())

function target(base: string): () => Promise<CaseTarget> {
  return async () => ({ url: await baseUrl(), path: `${base}/webhooks/svc`, runsPath: `${base}/runs` })
}

afterAll(async () => {
  if (!server || server.exitCode !== null) return
  const exited = new Promise((resolve) => server!.once('exit', resolve))
  server.kill('SIGTERM')
  const timer = setTimeout(() => server!.kill('SIGKILL'), 5_000)
  await exited
  clearTimeout(timer)
})

describeCaseTable('next app router, nodejs runtime', target('/node'))
describeCaseTable('next app router, edge runtime', target('/edge'))
describeCaseTable('next pages router (bodyParser: false)', target('/api/pages'))

describe('svc-webhooks/next', () => {
  it('the Edge bundle computes HMAC with WebCrypto, the Node.js bundle with node:crypto', async () => {
    await baseUrl()
    const dist = join(app, '.next')
    const manifest = JSON.parse(await readFile(join(dist, 'server/middleware-manifest.json'), 'utf8')) as {
      functions: Record<string, { files: string[] }>
    }
    const edge = manifest.functions['/edge/[...path]/route']
    expect(edge, 'the /edge route is an Edge function').toBeDefined()
    const edgeCode = (await Promise.all(edge!.files.map((file) => readFile(join(dist, file), 'utf8')))).join('\n')
    expect(edgeCode).toContain('crypto.subtle.importKey')
    expect(edgeCode).not.toContain('createHmac')
    expect(edgeCode).not.toContain('node:crypto')

    const chunks = join(dist, 'server/chunks')
    const nodeFiles = (await readdir(chunks)).filter((file) => file.endsWith('.js'))
    const nodeCode = (await Promise.all(nodeFiles.map((file) => readFile(join(chunks, file), 'utf8')))).join('\n')
    expect(nodeCode).toContain('createHmac')
  }, 180_000)

  it('the README route (secret from SVC_WEBHOOK_SECRET) answers a signed delivery', async () => {
    const url = await baseUrl()
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await fetch(`${url}/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ ok: true })
  }, 180_000)

  it('a Pages route without bodyParser: false -> 500 with the fix in the server log, handler not run', async () => {
    const url = await baseUrl()
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await fetch(`${url}/api/parsed/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(500)
    await res.text()
    const runs = (await (await fetch(`${url}/api/parsed/runs`)).json()) as { attempts: Record<string, number> }
    expect(runs.attempts[signed.id]).toBeUndefined()
    for (let attempt = 0; attempt < 50 && !serverLog.includes('body_already_parsed'); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(serverLog).toContain('body_already_parsed')
    expect(serverLog).toContain('export const config = { api: { bodyParser: false } }')
    expect(serverLog).not.toContain(CASE_SECRET)
    expect(serverLog).not.toContain(signed.body)
  }, 180_000)
})
