/**
 * svc-webhooks/next in a real Next.js server: the case app in test/apps/next-app is built
 * once with `next build` (Turbopack, offline) and served by `next start` on 127.0.0.1; the shared
 * case table then runs against the App Router handler on the Node.js runtime, on the Edge
 * runtime, and against the Pages Router helper, each also on its multi-tenant route (the tenant
 * read from the URL path in the same catch-all route file). The built package is copied into the
 * app's node_modules as `npm install` would lay it out, so the build resolves `svc-webhooks/next`
 * and its `#crypto` condition exactly as in a user's app. examples/next is built and run the
 * same way, as its README says.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cp, mkdir, readFile, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { CASE_SECRET, describeCaseTable, httpTransport, tenantPath, variantPath } from '../support/case-table.js'
import { freePort } from '../../tools/free-port.mjs'

const repo = fileURLToPath(new URL('../..', import.meta.url))
const nextBin = join(repo, 'node_modules/next/dist/bin/next')

interface NextServer {
  url: string
  /** Everything `next start` printed so far. */
  log(): string
  stop(): Promise<void>
}

function run(dir: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [nextBin, ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk))
    child.stderr.on('data', (chunk: Buffer) => (out += chunk))
    child.once('error', reject)
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`next ${args[0]} exited ${code}:\n${out}`))))
  })
}

function stop(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.kill('SIGKILL'), 5_000)
    server.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
    server.kill('SIGTERM')
  })
}

/**
 * Installs the built package (package.json + dist/) into `dir`'s node_modules, runs `next build`,
 * then `next start` on a free port; resolves once the server answers any request.
 */
async function startNext(dir: string, extraEnv: Record<string, string> = {}): Promise<NextServer> {
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1', ...extraEnv }
  const installed = join(dir, 'node_modules/svc-webhooks')
  await rm(installed, { recursive: true, force: true })
  await mkdir(installed, { recursive: true })
  await cp(join(repo, 'package.json'), join(installed, 'package.json'))
  await cp(join(repo, 'dist'), join(installed, 'dist'), { recursive: true })
  const buildStarted = performance.now()
  await run(dir, ['build'], env)
  console.log(`next build ${dir.slice(repo.length)}: ${Math.round(performance.now() - buildStarted)} ms`)

  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  let log = ''
  const server = spawn(process.execPath, [nextBin, 'start', '-H', '127.0.0.1', '-p', String(port)], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  server.stdout.on('data', (chunk: Buffer) => (log += chunk))
  server.stderr.on('data', (chunk: Buffer) => (log += chunk))
  for (let attempt = 0; attempt < 300; attempt++) {
    if (server.exitCode !== null) throw new Error(`next start exited ${server.exitCode}:\n${log}`)
    const answered = await fetch(url).then(async (res) => (await res.arrayBuffer(), true), () => false)
    if (answered) return { url, log: () => log, stop: () => stop(server) }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await stop(server)
  throw new Error(`next start did not answer within 300 attempts:\n${log}`)
}

/** Polls the server log until it contains `text` (Next writes it asynchronously), at most 5 s. */
async function logged(server: NextServer, text: string): Promise<string> {
  for (let attempt = 0; attempt < 50 && !server.log().includes(text); attempt++) await new Promise((resolve) => setTimeout(resolve, 100))
  return server.log()
}

describe('next: the case app (test/apps/next-app)', () => {
  let started: Promise<NextServer> | undefined
  /** One server for every suite below, started by the first that needs it, stopped in afterAll. */
  const fixture = () => (started ??= startNext(join(repo, 'test/apps/next-app')))
  afterAll(async () => {
    await (await started?.catch(() => undefined))?.stop()
  })

  const routes = (base: string) => async () =>
    httpTransport({
      url: (await fixture()).url,
      path: `${base}/webhooks/svc`,
      runsPath: `${base}/runs`,
      tenantPath: (tenant) => `${base}${tenantPath(tenant)}`,
      variantPath: (variant) => `${base}${variantPath(variant)}`,
    })
  describeCaseTable('next app router, nodejs runtime', routes('/node'))
  describeCaseTable('next app router, edge runtime', routes('/edge'), {
    // Measured with `next start`: the Edge route is not invoked until the whole body has arrived,
    // so a stalled body gets no answer at all (the sender's own timeout ends it).
    lacks: { 'stalled-body': "Next's Edge runtime runs the route only once the whole body has arrived" },
  })
  describeCaseTable('next pages router (bodyParser: false)', routes('/api/pages'))

  describe('svc-webhooks/next', () => {
    let server: NextServer
    beforeAll(async () => {
      server = await fixture()
    }, 180_000)

    it('the Edge bundle computes HMAC with WebCrypto, the Node.js bundle with node:crypto', async () => {
      const dist = join(repo, 'test/apps/next-app/.next')
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
    })

    it('a Pages route without bodyParser: false -> 500 with the fix in the server log, handler not run', async () => {
      const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
      const res = await fetch(`${server.url}/api/parsed/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })
      expect(res.status).toBe(500)
      await res.text()
      const runs = (await (await fetch(`${server.url}/api/parsed/runs`)).json()) as { attempts: Record<string, number> }
      expect(runs.attempts[signed.id]).toBeUndefined()
      const log = await logged(server, 'body_already_parsed')
      expect(log).toContain('body_already_parsed')
      expect(log).toContain('export const config = { api: { bodyParser: false } }')
      expect(log).not.toContain(CASE_SECRET)
      expect(log).not.toContain(signed.body)
    })
  })
})

describe('next: examples/next runs as its README says', () => {
  const secret = 'svc_whsec_test'
  let example: NextServer | undefined
  beforeAll(async () => {
    // Next imports the route during `next build`: the secret must be set then too.
    example = await startNext(join(repo, 'examples/next'), { SVC_WEBHOOK_SECRET: secret })
  }, 180_000)
  afterAll(async () => {
    await example?.stop()
  })

  it('the route (secret from SVC_WEBHOOK_SECRET) answers a signed delivery and logs it', async () => {
    const signed = await signWebhook({ secret, event: sampleEvent('message.received') })
    const res = await fetch(`${example!.url}/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ ok: true })
    expect(await logged(example!, signed.id)).toContain(`message.received ${signed.id}`)
  })
})
