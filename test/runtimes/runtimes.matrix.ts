/**
 * The runtime matrix: Node (this machine's 20, 22 and 24), Bun and Deno each serve
 * test/runtimes/app.mjs with their own server on 127.0.0.1; from this Node process the shared case
 * table runs over HTTP against its Fetch handler and its Hono app, and the known-answer vectors
 * (fixtures/vectors.json, computed by OpenSSL) run through verifyWebhook inside that runtime.
 * Run by `npm run test:runtimes` (scripts/test-runtimes.mjs prints the table).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { build } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeCaseTable, httpTransport, tenantPath, variantPath } from '../support/case-table.js'
import { describeWithService, itNeeding } from '../support/services.js'

const root = resolve(import.meta.dirname, '../..')
const work = mkdtempSync(join(tmpdir(), 'svc-webhooks-runtimes-'))
const caseAppFile = join(work, 'case-app.mjs')
const serveFile = join(root, 'test/runtimes/serve.mjs')
// Bun applies the cwd's tsconfig.json `paths` at runtime: the repository's map `svc-webhooks` to
// src/ and `#crypto` to the type-only src/crypto/contract.ts, for the type checker. Bun must load
// the built package as users install it, so it gets a tsconfig without them.
const bunTsconfig = join(work, 'tsconfig.json')
writeFileSync(bunTsconfig, '{}\n')
const bunFlags = [`--tsconfig-override=${bunTsconfig}`]

interface Runtime {
  name: string
  /** Expected `runtime` reported by the app. */
  kind: 'node' | 'bun' | 'deno'
  binary: string
  args: string[]
}

const deno = join(root, 'scripts/runtime-binaries/node_modules/@deno/linux-x64-glibc/deno')
// The Node running this file is the machine's (20 here; scripts/test-runtimes.mjs starts vitest
// with it, not with node_modules/.bin/node, which is the node22 package's binary).
const host = `node ${process.versions.node.split('.')[0]}`
const RUNTIMES: Runtime[] = [
  ...(host === 'node 22' || host === 'node 24' ? [] : [{ name: host, kind: 'node' as const, binary: process.execPath, args: [serveFile] }]),
  { name: 'node 22', kind: 'node', binary: join(root, 'scripts/runtime-binaries/node_modules/node22/bin/node'), args: [serveFile] },
  { name: 'node 24', kind: 'node', binary: join(root, 'scripts/runtime-binaries/node_modules/node24/bin/node'), args: [serveFile] },
  { name: 'bun', kind: 'bun', binary: join(root, 'scripts/runtime-binaries/node_modules/@oven/bun-linux-x64/bin/bun'), args: [...bunFlags, serveFile] },
  {
    name: 'deno',
    kind: 'deno',
    binary: deno,
    // `manual`: use the installed node_modules (with `none` Deno would fetch from the npm registry).
    args: ['run', '--node-modules-dir=manual', '--no-lock', '--allow-net=127.0.0.1', `--allow-read=${root},${work}`, serveFile],
  },
]

interface Vector {
  name: string
  outcome: { ok: true; signatureVersion: string; secretIndex: number } | { ok: false; code: string }
}
const vectorsFile = join(root, 'fixtures/vectors.json')
const vectors = (JSON.parse(readFileSync(vectorsFile, 'utf8')) as { vectors: Vector[] }).vectors

interface Info {
  runtime: string
  version: string
  crypto: string
}
/** What the script prints beside the pass counts: written to $SVC_RUNTIMES_REPORT. */
const report: Record<string, Info & { startMs: number }> = {}

const children: ChildProcess[] = []

beforeAll(async () => {
  // case-app.ts is TypeScript importing './case-table-constants.js': bundled to one plain module
  // (its other imports are types) that every runtime can load; app.mjs takes the whole module.
  await build({ entryPoints: [join(root, 'test/support/case-app.ts')], bundle: true, format: 'esm', platform: 'neutral', outfile: caseAppFile, logLevel: 'warning' })
})

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill()
  rmSync(work, { recursive: true, force: true })
  if (process.env.SVC_RUNTIMES_REPORT) writeFileSync(process.env.SVC_RUNTIMES_REPORT, JSON.stringify(report, null, 2))
})

/** Spawns the runtime's server and resolves with its URL once it prints it (bounded wait). */
function spawnServer(runtime: Runtime): Promise<{ url: string; child: ChildProcess }> {
  const started = performance.now()
  const child = spawn(runtime.binary, [...runtime.args, pathToFileURL(caseAppFile).href], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  })
  children.push(child)
  return new Promise((resolvePromise, reject) => {
    let stdout = ''
    let stderr = ''
    const fail = (why: string) => {
      clearTimeout(timer)
      child.kill()
      reject(new Error(`${runtime.name}: ${why}\n${stderr.slice(-2000)}`))
    }
    const timer = setTimeout(() => fail('no URL printed within 30 s'), 30_000)
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const line = stdout.split('\n').find((l) => l.startsWith('{"url"'))
      if (line === undefined) return
      clearTimeout(timer)
      const { url } = JSON.parse(line) as { url: string }
      report[runtime.name] = { ...report[runtime.name]!, startMs: Math.round(performance.now() - started) }
      resolvePromise({ url, child })
    })
    child.once('exit', (code, signal) => fail(`exited (${code ?? signal}) before listening`))
  })
}

/** Stops a child by closing its stdin (serve.mjs exits on EOF), with a kill as the fallback. */
function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
    child.once('exit', () => {
      clearTimeout(timer)
      resolvePromise()
    })
    child.stdin!.end()
  })
}

for (const runtime of RUNTIMES) {
  const missing = existsSync(runtime.binary) ? undefined : `${runtime.binary} is not installed (npm ci in scripts/runtime-binaries installs it)`
  describeWithService(runtime.name, runtime.name, missing, () => {
    let server: Promise<{ url: string; child: ChildProcess }> | undefined
    const start = () => (server ??= spawnServer(runtime))
    const url = async () => (await start()).url

    it('serves, and reports its version and the crypto #crypto resolved to', async () => {
      const info = (await (await fetch(`${await url()}/info`)).json()) as Info
      expect(info.runtime).toBe(runtime.kind)
      // package.json "imports": the node, bun and deno conditions all pick node:crypto.
      expect(info.crypto).toBe('node:crypto')
      report[runtime.name] = { ...info, startMs: report[runtime.name]?.startMs ?? 0 }
    }, 60_000)

    describe('vectors', () => {
      let outcomes: Map<string, unknown>
      beforeAll(async () => {
        const res = await fetch(`${await url()}/vectors`, { method: 'POST', body: readFileSync(vectorsFile) })
        expect(res.status).toBe(200)
        outcomes = new Map(((await res.json()) as ({ name: string } & Record<string, unknown>)[]).map(({ name, ...rest }) => [name, rest]))
      })
      it.each(vectors)('$name', (vector) => {
        expect(outcomes.get(vector.name)).toEqual(vector.outcome)
      })
    })

    describeCaseTable(`${runtime.name} / fetch`, async () =>
      httpTransport({
        url: await url(),
        path: '/fetch/webhooks/svc',
        runsPath: '/fetch/runs',
        tenantPath: (tenant) => `/fetch${tenantPath(tenant)}`,
        variantPath: (variant) => `/fetch${variantPath(variant)}`,
      }),
    )
    describeCaseTable(`${runtime.name} / hono`, async () =>
      httpTransport({
        url: await url(),
        path: '/hono/webhooks/svc',
        runsPath: '/hono/runs',
        tenantPath: (tenant) => `/hono${tenantPath(tenant)}`,
        variantPath: (variant) => `/hono${variantPath(variant)}`,
        close: async () => stop((await start()).child),
      }),
    )
  })
}

/** The examples in examples/bun, examples/deno and examples/lambda, run as their READMEs say. */
describe('examples', () => {
  const secret = 'svc_whsec_example-test-secret'

  async function send(url: string): Promise<{ status: number; body: unknown }> {
    const { signWebhook, sampleEvent } = await import('svc-webhooks/testing')
    const signed = await signWebhook({ secret, event: sampleEvent('message.received') })
    const res = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers })
    return { status: res.status, body: await res.json() }
  }

  /** Starts an example server with PORT=0 and resolves with the URL it prints (bounded wait). */
  function startExample(binary: string, args: string[]): Promise<{ url: string; child: ChildProcess }> {
    const child = spawn(binary, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SVC_WEBHOOK_SECRET: secret, PORT: '0' } })
    children.push(child)
    return new Promise((resolvePromise, reject) => {
      let out = ''
      const timer = setTimeout(() => reject(new Error(`no URL within 30 s:\n${out}`)), 30_000)
      const read = (chunk: Buffer) => {
        out += chunk.toString()
        const match = /(http:\/\/127\.0\.0\.1:\d+\/webhooks\/svc)/.exec(out)
        if (match) {
          clearTimeout(timer)
          resolvePromise({ url: match[1]!, child })
        }
      }
      child.stdout!.on('data', read)
      child.stderr!.on('data', read)
    })
  }

  const needs = itNeeding

  const bun = RUNTIMES.find((r) => r.kind === 'bun')!.binary
  needs(bun)('examples/bun/server.ts answers a signed delivery 200', async () => {
    const { url, child } = await startExample(bun, [...bunFlags, 'examples/bun/server.ts'])
    expect(await send(url)).toEqual({ status: 200, body: { ok: true } })
    child.kill()
  }, 60_000)

  needs(deno)('examples/deno/server.ts answers a signed delivery 200', async () => {
    const args = ['run', '--node-modules-dir=manual', '--no-lock', '--allow-net=127.0.0.1', '--allow-env=SVC_WEBHOOK_SECRET,PORT', '--allow-read=.', 'examples/deno/server.ts']
    const { url, child } = await startExample(deno, args)
    expect(await send(url)).toEqual({ status: 200, body: { ok: true } })
    child.kill()
  }, 60_000)

  it('examples/lambda/invoke.mjs: each event shape 200, its resend a duplicate', async () => {
    const child = spawn(process.execPath, ['examples/lambda/invoke.mjs'], { cwd: root, env: { ...process.env, SVC_WEBHOOK_SECRET: secret } })
    children.push(child)
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    const code = await new Promise((resolvePromise) => child.once('exit', resolvePromise))
    expect(code).toBe(0)
    for (const source of ['function URL', 'HTTP API', 'REST API']) {
      expect(out).toContain(`${source}: 200 {"ok":true}\n`)
      expect(out).toContain(`${source}: 200 {"ok":true,"duplicate":true}\n`)
    }
  }, 60_000)
})
