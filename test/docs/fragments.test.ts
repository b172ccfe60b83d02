/**
 * Every fragment of README.md and docs/*.md runs, in the context it names.
 *
 * A fragment starts with `// fragment of <context>: ...`; its context is a file of
 * test/docs/contexts/ (what the reader already has: the page's server up to its route, an ES
 * module, a service client...) whose `/* fragment *\/` line the block replaces. The spliced file
 * is written to a fresh directory against the packed tarball, beside the page's whole files (a
 * fragment may import one of them), type-checked with the options `tsc --init` writes (its .ts
 * ones), and run: a context that `runs as: server` listens on $PORT and must answer one signed
 * delivery to /webhooks/svc with a 2xx, one that `runs as: script` must exit 0. Either way its
 * output must hold no ReferenceError or unhandled error. One that `runs as: typecheck` is only
 * type-checked: its fragments name machines that are not this one.
 *
 * Every fence is marked: code is a whole file or a fragment, the rest names its kind (`sh`,
 * `text`, `toml`...). A block that is neither fails with its page, its line and how to mark it.
 */
import type { ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { transform } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort } from '../../tools/free-port.mjs'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { allBlocks, contextOf, contexts, contextsDir, HOW_TO_MARK, FRAGMENT, misMarked, PAGES, root, WHOLE_FILE, type Block } from '../support/doc-blocks.js'
import { accepting, installPacked, startNode, typecheck } from '../support/packed-project.js'
import { postgresSkipReason, redisSkipReason } from '../support/services.js'

const SECRET = 'svc_whsec_docs_fragments'
const known = contexts()
const blocks = allBlocks()

interface Fragment extends Block {
  context: string
  /** The spliced file: the context with its `/* fragment *\/` line replaced by the block. */
  source: string
  file: string
  runsAs: 'server' | 'script' | 'typecheck'
}

const fragments: Fragment[] = blocks
  .filter((b) => FRAGMENT.test(b.code) && misMarked(b, known) === undefined)
  .map((b) => {
    const context = contextOf(b)!
    const text = readFileSync(join(contextsDir, context), 'utf8')
    if (!text.includes('/* fragment */\n')) throw new Error(`test/docs/contexts/${context} has no "/* fragment */" line`)
    const runsAs = /^\/\/ runs as: (server|script|typecheck)$/m.exec(text)?.[1] as Fragment['runsAs'] | undefined
    if (!runsAs) throw new Error(`test/docs/contexts/${context} says none of "// runs as: server", "// runs as: script", "// runs as: typecheck"`)
    return { ...b, context, source: text.replace('/* fragment */\n', `${b.code}\n`), file: context.endsWith('.mjs') ? 'fragment.mjs' : 'fragment.ts', runsAs }
  })

/** Frameworks and clients the contexts import, linked from this repository's node_modules. */
const LINKED = ['express', 'hono', '@hono/node-server', 'fastify', 'koa', 'ioredis', 'redis', 'pg', 'pg-boss', 'bullmq', '@opentelemetry/api', '@opentelemetry/sdk-metrics', '@opentelemetry/exporter-prometheus', '@types/node', '@types/express', '@types/koa', '@types/pg']

let work: string
let redis: RedisServer | undefined
let postgres: PostgresServer | undefined
const children: ChildProcess[] = []
const needs = (what: string) => fragments.some((f) => f.source.includes(what))

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'svc-webhooks-fragments-'))
  installPacked(root, work, LINKED)
  if (needs('REDIS_URL') && redisSkipReason === undefined) redis = await startRedisServer()
  if (needs('DATABASE_URL') && postgresSkipReason === undefined) postgres = await startPostgresServer()
}, 120_000)

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL')
  await redis?.stop()
  await postgres?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

/** The fragment's directory: an ES module project with the spliced file and the page's whole files (TypeScript ones transpiled as tsx would). */
async function project(fragment: Fragment, n: number): Promise<string> {
  const dir = join(work, `${fragment.page.replace(/\W/g, '-')}-${fragment.line}-${n}`)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `fragment-${n}`, version: '1.0.0', type: 'module' }))
  for (const whole of blocks.filter((b) => b.page === fragment.page && WHOLE_FILE.test(b.code))) {
    const file = WHOLE_FILE.exec(whole.code)![1]!
    if (file.includes('/')) continue
    writeFileSync(join(dir, file), whole.code)
    if (file.endsWith('.ts')) writeFileSync(join(dir, file.replace(/\.ts$/, '.js')), (await transform(whole.code, { loader: 'ts', format: 'esm', target: 'node20' })).code)
  }
  writeFileSync(join(dir, fragment.file), fragment.source)
  return dir
}

function run(dir: string, file: string, port: number) {
  return startNode(children, dir, file, { PATH: process.env.PATH, SVC_WEBHOOK_SECRET: SECRET, PORT: String(port), REDIS_URL: redis?.url, DATABASE_URL: postgres?.url })
}

/** Where line `n` of a spliced file comes from: the page's line inside the block, else the context's. */
function placeOf(fragment: Fragment, n: number): string {
  const marker = readFileSync(join(contextsDir, fragment.context), 'utf8').split('\n').indexOf('/* fragment */') + 1
  const length = fragment.code.split('\n').length
  if (n >= marker && n < marker + length) return String(fragment.line + 1 + n - marker)
  return `${fragment.line} (test/docs/contexts/${fragment.context}:${n < marker ? n : n - length + 1})`
}

// ---------------------------------------------------------------------------------------------

describe('docs: every fence says what it is', () => {
  it('has fragments to run, on several pages', () => {
    expect(new Set(fragments.map((f) => f.page)).size).toBeGreaterThan(5)
  })

  it('every context in test/docs/contexts/ is used by a fragment', () => {
    expect([...known].filter((context) => !fragments.some((f) => f.context === context))).toEqual([])
  })

  it.each(PAGES)('%s', (page) => {
    expect(blocks.filter((b) => b.page === page).flatMap((b) => misMarked(b, known) ?? []), HOW_TO_MARK).toEqual([])
  })
})

describe('docs: fragments type-check in their context with the options `tsc --init` writes', () => {
  it('tsc --noEmit passes', () => {
    const ts = fragments.filter((f) => f.file.endsWith('.ts'))
    const dir = join(work, 'tsc')
    const files = ts.map((fragment, n) => {
      const sub = join(dir, String(n))
      mkdirSync(sub, { recursive: true })
      writeFileSync(join(sub, 'package.json'), JSON.stringify({ name: `typed-${n}`, version: '1.0.0', type: 'module' }))
      for (const whole of blocks.filter((b) => b.page === fragment.page && WHOLE_FILE.test(b.code) && /\.ts$/.test(WHOLE_FILE.exec(b.code)![1]!))) {
        const file = WHOLE_FILE.exec(whole.code)![1]!
        if (!file.includes('/')) writeFileSync(join(sub, file), whole.code)
      }
      writeFileSync(join(sub, fragment.file), fragment.source)
      return join(String(n), fragment.file)
    })
    const out = typecheck(root, dir, files)
    // Each error names the page and line it comes from (or the context's line), not the directory it was checked in.
    const errors = out.output
      .split('\n')
      .filter((line) => /^\d+\//.test(line))
      .map((line) => {
        const m = /^(\d+)\/([\w.-]+)\((\d+),(\d+)\): (.*)$/.exec(line)
        if (!m) return line
        const fragment = ts[Number(m[1])]!
        if (m[2] !== fragment.file) return `${fragment.page}:${fragment.line} (its ${m[2]}:${m[3]}): ${m[5]}`
        return `${fragment.page}:${placeOf(fragment, Number(m[3]))}: ${m[5]}`
      })
    expect(errors).toEqual([])
    expect(out.status, out.stdout).toBe(0)
  }, 120_000)
})

// A `typecheck` context's fragments name other machines: the tsc test above is all they get.
const running = fragments.flatMap((f, n) => (f.runsAs === 'typecheck' ? [] : [[`${f.page}:${f.line} in ${f.context}`, f, n] as const]))

describe.each(running)('%s runs', (_name, fragment, n) => {
  it(`${fragment.runsAs}`, async ({ skip }) => {
    const missing = [fragment.source.includes('REDIS_URL') && redisSkipReason, fragment.source.includes('DATABASE_URL') && postgresSkipReason].find(Boolean)
    if (missing) {
      if (process.env.CI === 'true') throw new Error(`CI=true and ${missing}`)
      skip(missing)
    }
    const dir = await project(fragment, n)
    let file = fragment.file
    if (file.endsWith('.ts')) {
      const { code } = await transform(fragment.source, { loader: 'ts', format: 'esm', target: 'node20', sourcefile: file })
      file = 'fragment.mjs'
      writeFileSync(join(dir, file), code)
    }
    const port = await freePort()
    const child = run(dir, file, port)
    const where = () => `${fragment.page}:${fragment.line} in test/docs/contexts/${fragment.context}:\n${child.output()}`
    if (fragment.runsAs === 'server') {
      await accepting(port, child.exited, where, 150)
      const { signWebhook, sampleEvent } = (await import(/* @vite-ignore */ pathToFileURL(join(work, 'node_modules/svc-webhooks/dist/testing.js')).href)) as typeof import('svc-webhooks/testing')
      const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
      const text = await res.text()
      expect(res.status, `${text}\n${where()}`).toBeGreaterThanOrEqual(200)
      expect(res.status, `${text}\n${where()}`).toBeLessThan(300)
      child.child.kill()
      await child.exited
    } else {
      const timer = setTimeout(() => child.child.kill('SIGKILL'), 30_000)
      const code = await child.exited
      clearTimeout(timer)
      expect(code, where()).toBe(0)
    }
    expect(child.output(), where()).not.toMatch(/Unhandled error event|ReferenceError|is not defined|Error \[ERR_|SyntaxError/)
  }, 60_000)
})
