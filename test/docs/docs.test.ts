/**
 * Docs are code, and their links lead somewhere.
 *
 * Every relative link in README.md and docs/*.md resolves to a file (and heading) of the
 * repository, and every one in the Markdown the tarball ships resolves inside the tarball: a
 * reader in node_modules cannot follow a link to examples/ or bench/, which are not published.
 *
 * Every fenced js/ts block in README.md and docs/*.md that is a whole file (its first line names
 * it: `// server.mjs`) runs as pasted (fragments run in fragments.test.ts), in a fresh directory whose package.json is
 * what `npm init -y` writes (CommonJS, unless the page says `npm pkg set type=module`), against
 * the packed tarball (`npm pack`; frameworks linked from this repository's node_modules):
 *
 * - a `*.test.ts` file runs under vitest, every test passing;
 * - a server starts on $PORT, answers one delivery signed by the tarball's testing kit 2xx (its
 *   handler ran, or an inbox stored it), and is stopped;
 * - a Lambda handler, a Next.js route and a Cloudflare Worker get one signed delivery the way
 *   their runtime hands it over (an API Gateway event, a `Request` or a `req`/`res` pair, workerd);
 * - an inbox worker runs the handler of one delivery a receiver (built from the tarball) accepted
 *   into the same Redis, then stops on SIGTERM;
 * - a module loads.
 *
 * TypeScript is transpiled as `tsx` does (ES module or CommonJS by the package type) and the
 * Node.js files are also type-checked with the options `tsc --init` writes. Redis and Postgres
 * come from the servers of tools/redis.mjs and tools/postgres.mjs ($REDIS_URL, $DATABASE_URL).
 */
import type { ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { build, transform } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort } from '../../tools/free-port.mjs'
import { brokenLinks } from '../support/markdown.js'
import { allBlocks, CODE, PAGES, WHOLE_FILE } from '../support/doc-blocks.js'
import { eventOf } from '../support/lambda-events.js'
import { accepting, installPacked, startNode, typecheck } from '../support/packed-project.js'
import { postgresSkipReason, redisSkipReason } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { startWorkerd } from '../support/workerd.js'

const root = resolve(import.meta.dirname, '../..')
const SECRET = 'svc_whsec_docs_snippets'

const all = allBlocks().filter((b) => CODE.has(b.lang))
const wholeFiles = all.filter((b) => WHOLE_FILE.test(b.code)).map((b) => ({ ...b, file: WHOLE_FILE.exec(b.code)![1]! }))
type WholeFile = (typeof wholeFiles)[number]

/** How a whole file is run, from what it imports and is named. */
type Kind = 'vitest' | 'server' | 'lambda' | 'next-app' | 'next-pages' | 'worker' | 'inbox-worker' | 'module'
function kindOf({ file, code }: WholeFile): Kind {
  if (/\.test\.[mc]?[jt]s$/.test(file)) return 'vitest'
  // A module Worker: the Cloudflare entry, or a Worker of its own (src/worker.ts) built on svc-webhooks/fetch.
  if (code.includes("'svc-webhooks/cloudflare'") || /^src\/[\w-]*worker\.ts$/.test(file)) return 'worker'
  if (code.includes('createInboxWorker(') && code.includes('RedisInbox') && !/\.listen\(|serve\(/.test(code)) return 'inbox-worker'
  if (code.includes("'svc-webhooks/lambda'")) return 'lambda'
  if (file.startsWith('pages/api/')) return 'next-pages'
  if (/(^|\/)app\/.*route\.ts$/.test(file)) return 'next-app'
  if (/\.listen\(|serve\(/.test(code)) return 'server'
  return 'module'
}

/** The page asks for an ES module project (`npm pkg set type=module`). */
const esmPages = new Set(PAGES.filter((page) => readFileSync(join(root, page), 'utf8').includes('npm pkg set type=module')))

// ---------------------------------------------------------------------------------------------

let work: string
let tarballRoot: string
let redis: RedisServer | undefined
let postgres: PostgresServer | undefined
const children: ChildProcess[] = []
const needs = (what: string) => wholeFiles.some((b) => b.code.includes(what))

/** Links from this repository's node_modules that the snippets import (as `npm install <framework>` would add). */
const LINKED = ['vitest', 'express', 'hono', '@hono/node-server', 'fastify', 'koa', '@types/koa', 'ioredis', 'redis', 'pg', 'next', '@types/node', '@types/express', '@types/pg', '@types/aws-lambda']

beforeAll(async () => {
  if (!readdirSync(join(root, 'dist')).includes('index.js')) throw new Error('dist/ is missing: run `npm run build` first')
  work = mkdtempSync(join(tmpdir(), 'svc-webhooks-docs-'))
  // The tarball npm would publish, unpacked as `npm install` would.
  tarballRoot = installPacked(root, work, LINKED)
  // Where a server cannot run, the snippets that need it say why and skip (never under CI=true).
  if (needs('REDIS_URL') && redisSkipReason === undefined) redis = await startRedisServer()
  if (needs('DATABASE_URL') && postgresSkipReason === undefined) postgres = await startPostgresServer()
}, 120_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL')
  await redis?.stop()
  await postgres?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

/** The tarball's own testing kit, as a user's test would import it. */
async function testingKit(): Promise<typeof import('svc-webhooks/testing')> {
  return (await import(/* @vite-ignore */ pathToFileURL(join(tarballRoot, 'dist/testing.js')).href)) as typeof import('svc-webhooks/testing')
}

/** A fresh directory for `block`, with the package.json `npm init -y` writes, and the file as pasted (TypeScript transpiled as tsx does). Returns the dir and the file to run. */
async function project(block: WholeFile, n: number): Promise<{ dir: string; run: string; type: 'module' | 'commonjs' }> {
  const dir = join(work, `${block.page.replace(/\W/g, '-')}-${n}`)
  const type = esmPages.has(block.page) ? 'module' : 'commonjs'
  mkdirSync(dirname(join(dir, block.file)), { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `snippet-${n}`, version: '1.0.0', main: 'index.js', license: 'ISC', type }, null, 2))
  writeFileSync(join(dir, block.file), block.code)
  if (!/\.m?ts$|\.cts$/.test(block.file) || kindOf(block) === 'vitest') return { dir, run: block.file, type }
  // tsx compiles a .ts file to the module format its package.json says (an .mts is always ESM).
  const esm = block.file.endsWith('.mts') || (type === 'module' && !block.file.endsWith('.cts'))
  const { code } = await transform(block.code, { loader: 'ts', format: esm ? 'esm' : 'cjs', target: 'node20', sourcefile: block.file })
  const run = block.file.replace(/\.[mc]?ts$/, esm ? '.mjs' : '.cjs')
  writeFileSync(join(dir, run), code)
  return { dir, run, type }
}

/** The environment a snippet reads: the secret, the port, the servers. */
function env(port: number): Record<string, string | undefined> {
  return { PATH: process.env.PATH, SVC_WEBHOOK_SECRET: SECRET, PORT: String(port), REDIS_URL: redis?.url, DATABASE_URL: postgres?.url }
}

/** Runs `node file` in `dir`; its output is captured, never printed. */
function start(dir: string, file: string, environment: Record<string, string | undefined>, args: string[] = []) {
  return startNode(children, dir, file, environment, args)
}

/** A 2xx that means the delivery was processed or durably accepted, not ignored. */
function expectTaken(status: number, body: unknown, output: string): void {
  expect(status, output).toBeGreaterThanOrEqual(200)
  expect(status, output).toBeLessThan(300)
  expect(body, output).toMatchObject({ ok: true })
  expect(body, output).not.toHaveProperty('ignored')
}

/** Output nothing a pasted snippet should ever print. */
function expectClean(output: string): void {
  expect(output).not.toMatch(/Unhandled error event|ReferenceError|is not defined|Error \[ERR_/)
}

// ---------------------------------------------------------------------------------------------

describe('docs: links', () => {
  it.each(['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)])(
    'every relative link in %s resolves to a file (and heading) of the repository',
    (file) => {
      expect(brokenLinks(join(root, file), root)).toEqual([])
    },
  )

  it('every relative link in the Markdown the tarball ships resolves inside the tarball', () => {
    const shipped = ['README.md', 'CHANGELOG.md', ...readdirSync(join(tarballRoot, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'))
    expect(shipped.length).toBeGreaterThan(10)
    expect(shipped.flatMap((file) => brokenLinks(join(tarballRoot, file), tarballRoot).map((why) => `${file}: ${why}`))).toEqual([])
  })
})

describe('docs: whole files', () => {
  it('has whole files to run, on several pages', () => {
    expect(new Set(wholeFiles.map((b) => b.page)).size).toBeGreaterThan(5)
  })
})

const SERVICE_TIMEOUT = 90_000

describe.each(wholeFiles.map((block, n) => [`${block.page}:${block.line} ${block.file}`, block, n] as const))('%s runs as pasted', (_name, block, n) => {
  const kind = kindOf(block)

  it(`${kind}: takes one signed delivery`, async ({ skip }) => {
    const missing = [block.code.includes('REDIS_URL') && redisSkipReason, block.code.includes('DATABASE_URL') && postgresSkipReason].find(Boolean)
    if (missing) {
      if (process.env.CI === 'true') throw new Error(`CI=true and ${missing}`)
      skip(missing)
    }
    const { signWebhook, sampleEvent, createSignedRequest } = await testingKit()
    const { dir, run, type } = await project(block, n)
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })

    if (kind === 'vitest') {
      // A test file of the user's suite: vitest runs it as they would, and every test passes.
      const runner = start(dir, join(work, 'node_modules/vitest/vitest.mjs'), { ...env(await freePort()), CI: 'true', NO_COLOR: '1' }, ['run', block.file])
      const code = await runner.exited
      expect(code, runner.output()).toBe(0)
      expect(runner.output()).toMatch(/Tests +\d+ passed/)
      return
    }

    if (kind === 'server') {
      const port = await freePort()
      const server = start(dir, run, env(port))
      await accepting(port, server.exited, server.output, 200)
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
      expectTaken(res.status, await res.json(), server.output())
      server.child.kill()
      await server.exited
      expectClean(server.output())
      return
    }

    if (kind === 'worker') {
      // Bundled as wrangler does, with the bindings the page's wrangler.toml declares.
      const toml = readFileSync(join(root, block.page), 'utf8')
      const durableObjects = Object.fromEntries([...toml.matchAll(/name = "(\w+)"\nclass_name = "(\w+)"/g)].map((m) => [m[1]!, m[2]!]))
      const queue = /binding = "(\w+)"\nqueue = "([\w-]+)"/.exec(toml)
      const result = await build({
        entryPoints: [join(dir, block.file)],
        bundle: true,
        write: false,
        format: 'esm',
        platform: 'neutral',
        conditions: ['workerd', 'worker', 'browser'],
        mainFields: ['module', 'main'],
        external: ['cloudflare:*'],
        logLevel: 'error',
      })
      const usesQueue = block.code.includes('queue:')
      const worker = await startWorkerd({
        script: result.outputFiles[0]!.text,
        bindings: { SVC_WEBHOOK_SECRET: SECRET },
        durableObjects,
        ...(usesQueue && queue ? { queueProducers: { [queue[1]!]: { queueName: queue[2]! } }, queueConsumers: { [queue[2]!]: { maxBatchTimeout: 0 } } } : {}),
      })
      try {
        const res = await fetch(`${worker.url}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
        expectTaken(res.status, await res.json(), worker.logs())
      } finally {
        await worker.dispose()
      }
      return
    }

    if (kind === 'inbox-worker') {
      const port = await freePort()
      const worker = start(dir, run, env(port))
      // The receiver side, as the page's receiver would be: the tarball's RedisInbox on the same Redis.
      const { createWebhookReceiver } = (await import(/* @vite-ignore */ pathToFileURL(join(tarballRoot, 'dist/index.js')).href)) as typeof import('svc-webhooks')
      const { RedisInbox } = (await import(/* @vite-ignore */ pathToFileURL(join(tarballRoot, 'dist/redis.js')).href)) as typeof import('svc-webhooks/redis')
      const { Redis } = await import('ioredis')
      const client = new Redis(redis!.url)
      try {
        const inbox = new RedisInbox({ client })
        const answer = await createWebhookReceiver({ secret: SECRET, inbox, log: false }).handle({ method: 'POST', body: signed.body, headers: signed.headers })
        expect(answer.status).toBe(202)
        let stats = await inbox.stats()
        for (let i = 0; i < 200 && (stats.depth > 0 || stats.retrying > 0); i++) {
          await new Promise((done) => setTimeout(done, 100))
          stats = await inbox.stats()
        }
        expect(stats, worker.output()).toMatchObject({ depth: 0, retrying: 0, dead: 0 })
      } finally {
        client.disconnect()
      }
      worker.child.kill('SIGTERM')
      expect(await worker.exited, worker.output()).toBe(0) // a graceful stop
      expectClean(worker.output())
      return
    }

    // The others are loaded by a small driver, in a process of their own with the snippet's environment.
    const ext = type === 'module' ? 'mjs' : 'cjs'
    const load = type === 'module' ? `await import('./${run}')` : `require('./${run}')`
    let driver: string
    if (kind === 'lambda') {
      writeFileSync(join(dir, 'event.json'), JSON.stringify(eventOf('http-api-v2', { body: signed.body, headers: signed.headers })))
      driver = `const { handler } = ${load}\nconst event = JSON.parse(require('node:fs').readFileSync('event.json', 'utf8'))\nhandler(event, {}).then((r) => console.log('RESULT ' + JSON.stringify({ status: r.statusCode, body: JSON.parse(r.body) })))`
    } else if (kind === 'next-app') {
      writeFileSync(join(dir, 'request.json'), JSON.stringify({ headers: signed.headers, body: signed.body }))
      driver = `const { POST } = ${load}\nconst { headers, body } = JSON.parse(require('node:fs').readFileSync('request.json', 'utf8'))\nPOST(new Request('http://127.0.0.1/webhooks/svc', { method: 'POST', headers, body })).then(async (r) => console.log('RESULT ' + JSON.stringify({ status: r.status, body: await r.json() })))`
      void createSignedRequest
    } else if (kind === 'next-pages') {
      // Next.js hands a Pages API route Node's req and res; with bodyParser off, the stream is unread.
      driver = `const route = ${load}\nconst handler = route.default ?? route\nconst server = require('node:http').createServer((req, res) => handler(req, res))\nserver.listen(Number(process.env.PORT), '127.0.0.1')`
    } else {
      driver = `${load}\nconsole.log('RESULT ' + JSON.stringify({ status: 200, body: { ok: true } }))`
    }
    if (type === 'module') driver = `import { createRequire } from 'node:module'\nconst require = createRequire(import.meta.url)\n${driver}`
    writeFileSync(join(dir, `driver.${ext}`), driver)

    const port = await freePort()
    const child = start(dir, `driver.${ext}`, env(port))
    if (kind === 'next-pages') {
      await accepting(port, child.exited, child.output, 200)
      const res = await fetch(`http://127.0.0.1:${port}/api/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
      expectTaken(res.status, await res.json(), child.output())
      child.child.kill()
    }
    const code = await child.exited
    if (kind !== 'next-pages') {
      expect(code, child.output()).toBe(0)
      const result = /^RESULT (.*)$/m.exec(child.output())
      expect(result, child.output()).not.toBeNull()
      const { status, body } = JSON.parse(result![1]!) as { status: number; body: unknown }
      expectTaken(status, body, child.output())
    }
    expectClean(child.output())
  }, SERVICE_TIMEOUT)
})

describe('docs: the Node.js whole files type-check with the options `tsc --init` writes', () => {
  it('tsc --noEmit passes', () => {
    // Workers are checked against `wrangler types` output, Next.js routes by next build with its own tsconfig.
    const ts = wholeFiles.filter((b) => /\.m?ts$/.test(b.file) && !['worker', 'next-app', 'next-pages'].includes(kindOf(b)))
    const dir = join(work, 'tsc')
    const files: string[] = []
    ts.forEach((block, n) => {
      const sub = join(dir, String(n))
      mkdirSync(dirname(join(sub, block.file)), { recursive: true })
      writeFileSync(join(sub, 'package.json'), JSON.stringify({ name: `typed-${n}`, version: '1.0.0', type: esmPages.has(block.page) ? 'module' : 'commonjs' }))
      writeFileSync(join(sub, block.file), block.code)
      files.push(join(String(n), block.file))
    })
    const out = typecheck(root, dir, files, { noUncheckedSideEffectImports: true })
    expect(out.output).toBe('')
    expect(out.status).toBe(0)
  }, 120_000)
})
