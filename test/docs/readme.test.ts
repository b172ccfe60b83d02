/**
 * The README keeps telling the truth to a newcomer:
 *
 * - its Quick start JavaScript runs as pasted against the built package (installed in a temp
 *   project as npm lays it out, through a symlink): a signed delivery is answered 200, its resend
 *   200 duplicate, GET /runs reports one run, `svc-webhooks doctor --runs-url` passes every check,
 *   and a busy port exits 1 instead of printing "receiving";
 * - its Quick start TypeScript compiles with the repository's tsc under `strict` (no skipLibCheck)
 *   and, transpiled by esbuild, runs the same way;
 * - the secrets-cache recipe it links to (docs/multi-tenant.md) compiles under `strict`, caches
 *   as the text around it says, and a receiver using it answers 404 for an unknown tenant and
 *   503 for a failed lookup;
 * - its error table lists exactly the codes of ERROR_STATUS, each with the status, cause and fix
 *   of its row of ANSWERS (markdown aside), and its answers table every other row of ANSWERS;
 * - it has at most 300 lines, its first 120 reach the Quick start, a test delivery and a
 *   where-next table, and it starts with a table of contents of its sections.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { transform } from 'esbuild'
import { ANSWERS, ERROR_STATUS, createWebhookReceiver } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { slug } from '../support/markdown.js'

const root = resolve(import.meta.dirname, '../..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const secret = 'svc_whsec_local'

/** The text of a `## ` section of the README, without its heading. */
function section(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`)
  if (start < 0) throw new Error(`README: no "## ${title}" section`)
  const end = markdown.indexOf('\n## ', start + 1)
  return markdown.slice(start, end < 0 ? undefined : end)
}

/** Every fenced block of `lang` in `markdown`, as written. */
function blocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm'))].map((m) => m[1]!)
}

/** The one block of `lang` whose first line is `firstLine`. */
function block(markdown: string, lang: string, firstLine: string): string {
  const found = blocks(markdown, lang).filter((code) => code.startsWith(`${firstLine}\n`))
  if (found.length !== 1) throw new Error(`expected one \`\`\`${lang} block starting "${firstLine}", found ${found.length}`)
  return found[0]!
}

const quickStart = section(readme, 'Quick start')
const quickJs = block(quickStart, 'js', '// server.mjs')
const quickTs = block(section(readme, 'Quick start in TypeScript'), 'ts', '// server.ts')
const recipe = block(readFileSync(join(root, 'docs/multi-tenant.md'), 'utf8'), 'ts', '// tenant-secrets.ts: a cache per process, keyed by tenant')

// ---------------------------------------------------------------------------------------------
// A temp project where `svc-webhooks` and `express` resolve as after `npm install svc-webhooks express`.

let work: string
const children: ChildProcess[] = []
const occupied: Server[] = []

function project(name: string, files: Record<string, string>, types = false): string {
  const dir = join(work, name)
  mkdirSync(join(dir, 'node_modules/@types'), { recursive: true })
  symlinkSync(root, join(dir, 'node_modules/svc-webhooks'), 'dir')
  symlinkSync(join(root, 'node_modules/express'), join(dir, 'node_modules/express'), 'dir')
  if (types) {
    for (const name of ['express', 'node']) symlinkSync(join(root, 'node_modules/@types', name), join(dir, 'node_modules/@types', name), 'dir')
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }))
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text)
  return dir
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/express.js'))) throw new Error('dist/ is missing: run `npm run build` first')
  work = mkdtempSync(join(tmpdir(), 'svc-webhooks-readme-'))
})
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill()
  await Promise.all(occupied.map((server) => new Promise((done) => server.close(done))))
  if (work) rmSync(work, { recursive: true, force: true })
})

/** A port: free (asked from the kernel, then released), or held by another server. */
async function port(hold = false): Promise<number> {
  const server = createServer()
  await new Promise<void>((done, fail) => {
    server.once('error', fail)
    server.listen(0, () => done())
  })
  const { port } = server.address() as { port: number }
  if (hold) occupied.push(server)
  else await new Promise((done) => server.close(done))
  return port
}

interface Started {
  child: ChildProcess
  output: () => string
  exited: Promise<number | null>
}

/** Runs `node file` in `dir` with the README's environment: the local secret and PORT. */
function start(dir: string, file: string, portNumber: number): Started {
  const child = spawn(process.execPath, [file], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SVC_WEBHOOK_SECRET: secret, PORT: String(portNumber) },
  })
  children.push(child)
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  return { child, output: () => out, exited: new Promise((done) => child.once('exit', (code) => done(code))) }
}

function listening({ child, output, exited }: Started): Promise<void> {
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`not listening within 20 s:\n${output()}`)), 20_000)
    const look = () => {
      if (output().includes('receiving on')) {
        clearTimeout(timer)
        done()
      }
    }
    child.stdout!.on('data', look)
    look()
    void exited.then((code) => {
      clearTimeout(timer)
      fail(new Error(`exited ${code} before listening:\n${output()}`))
    })
  })
}

/** The CLI as `npx svc-webhooks` runs it: exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [join(root, 'dist/cli.js'), ...args], { env: { ...process.env, SVC_WEBHOOK_SECRET: secret } })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', fail)
    child.on('close', (code) => done({ code, output }))
  })
}

/** What the README promises of a running quick start. */
async function checkRunning(dir: string, file: string): Promise<void> {
  const portNumber = await port()
  const server = start(dir, file, portNumber)
  await listening(server)
  expect(server.output()).toContain(`receiving on http://127.0.0.1:${portNumber}/webhooks/svc`)
  const base = `http://127.0.0.1:${portNumber}`

  const signed = await signWebhook({ secret, event: sampleEvent('message.received') })
  const first = await fetch(`${base}/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })
  expect({ status: first.status, body: await first.json() }).toEqual({ status: 200, body: { ok: true } })
  const resend = await signWebhook({ secret, event: sampleEvent('message.received'), id: signed.id })
  const second = await fetch(`${base}/webhooks/svc`, { method: 'POST', body: resend.body, headers: resend.headers })
  expect({ status: second.status, body: await second.json() }).toEqual({ status: 200, body: { ok: true, duplicate: true } })
  const runs = await fetch(`${base}/runs`)
  expect(await runs.json()).toEqual({ runs: { [signed.id]: 1 } })

  // "Send it a test delivery", as written there.
  const sent = await cli(['send', `${base}/webhooks/svc`, '--resend'])
  expect(sent.output).toContain('{"ok":true,"duplicate":true}')
  expect(sent.code).toBe(0)
  const doctor = await cli(['doctor', `${base}/webhooks/svc`, '--runs-url', `${base}/runs`])
  expect(doctor.output).toMatch(/\d+ passed, 0 failed/)
  expect(doctor.code, doctor.output).toBe(0)
  server.child.kill()
}

describe('README Quick start, JavaScript', () => {
  it('reads PORT and defines everything it calls', () => {
    expect(quickJs).toContain('process.env.PORT ?? 3000')
    expect(quickJs).toMatch(/async function saveMessage\(/)
    expect(quickJs).toContain("app.get('/runs'")
  })

  it('runs as pasted: 200, a resend 200 duplicate, /runs, send and doctor pass', async () => {
    const dir = project('quick-js', { 'server.mjs': quickJs })
    await checkRunning(dir, 'server.mjs')
  }, 60_000)

  it('fails loudly on a busy port: exit 1 and the address, never "receiving"', async () => {
    const dir = project('quick-js-busy', { 'server.mjs': quickJs })
    const busy = await port(true)
    const server = start(dir, 'server.mjs', busy)
    const code = await Promise.race([server.exited, new Promise((done) => setTimeout(() => done('still running after 20 s'), 20_000))])
    expect(code, server.output()).toBe(1)
    expect(server.output()).toContain('EADDRINUSE')
    expect(server.output()).toContain(String(busy))
    expect(server.output()).not.toContain('receiving on')
  }, 30_000)
})

/** The repository's TypeScript on `dir`'s tsconfig.json. */
function tsc(dir: string): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [join(root, 'node_modules/typescript/lib/tsc.js'), '-p', join(dir, 'tsconfig.json'), '--pretty', 'false'], { cwd: dir })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', fail)
    child.on('close', (code) => done({ code, output: output.trim() }))
  })
}

const STRICT = {
  strict: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: false,
  noEmit: true,
  target: 'ES2022',
  module: 'nodenext',
  moduleResolution: 'nodenext',
  types: ['node'],
}

describe('README Quick start, TypeScript', () => {
  it('compiles under strict with the repository tsc (and so does the secrets-cache recipe)', async () => {
    const dir = project('quick-ts', { 'server.ts': quickTs, 'tenant-secrets.ts': recipe }, true)
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: STRICT, files: ['server.ts', 'tenant-secrets.ts'] }))
    expect(await tsc(dir)).toEqual({ code: 0, output: '' })
  }, 60_000)

  it('runs transpiled by esbuild, as tsx or Node type stripping would', async () => {
    const { code } = await transform(quickTs, { loader: 'ts', format: 'esm', target: 'node20' })
    const dir = project('quick-ts-run', { 'server.mjs': code })
    await checkRunning(dir, 'server.mjs')
  }, 60_000)
})

// ---------------------------------------------------------------------------------------------

type Lookup = ((tenant: string) => Promise<string | string[] | undefined>) & { forget: (tenant: string) => void }
type CachedSecrets = (load: (tenant: string) => Promise<string | string[] | undefined>, ttlMs?: number, unknownTtlMs?: number) => Lookup

describe('docs/multi-tenant.md secrets-cache recipe (many endpoints, one receiver)', () => {
  let cachedSecrets: CachedSecrets
  beforeAll(async () => {
    const { code } = await transform(recipe, { loader: 'ts', format: 'esm', target: 'node20' })
    const file = join(work, 'tenant-secrets.mjs')
    writeFileSync(file, code)
    ;({ cachedSecrets } = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as { cachedSecrets: CachedSecrets })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  /** A store of secrets that counts its lookups; `down` makes it fail. */
  function store(secrets: Record<string, string>) {
    const calls: string[] = []
    const state = { down: false }
    const load = async (tenant: string) => {
      calls.push(tenant)
      if (state.down) throw new Error('database down')
      return secrets[tenant]
    }
    return { load, calls, state }
  }

  it('a known tenant: one lookup per ttlMs, shared by concurrent requests; forget() drops it', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const { load, calls } = store({ acme: 'svc_whsec_acme' })
    const lookup = cachedSecrets(load, 60_000, 5_000)
    expect(await Promise.all([lookup('acme'), lookup('acme')])).toEqual(['svc_whsec_acme', 'svc_whsec_acme'])
    await lookup('acme')
    expect(calls).toEqual(['acme'])
    vi.advanceTimersByTime(60_001)
    await lookup('acme')
    expect(calls).toEqual(['acme', 'acme'])
    lookup.forget('acme')
    await lookup('acme')
    expect(calls).toEqual(['acme', 'acme', 'acme'])
  })

  it('an unknown tenant is cached for unknownTtlMs only; a failed lookup is never cached', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const { load, calls, state } = store({})
    const lookup = cachedSecrets(load, 60_000, 5_000)
    expect(await lookup('nobody')).toBeUndefined()
    await lookup('nobody')
    expect(calls).toEqual(['nobody'])
    vi.advanceTimersByTime(5_001)
    await lookup('nobody')
    expect(calls).toEqual(['nobody', 'nobody'])

    state.down = true
    await expect(lookup('acme')).rejects.toThrow('database down')
    await expect(lookup('acme')).rejects.toThrow('database down')
    expect(calls.filter((t) => t === 'acme')).toHaveLength(2)
  })

  it('behind a receiver: a known tenant verifies, an unknown one is 404, a failed lookup 503 with Retry-After', async () => {
    const { load, state } = store({ acme: 'svc_whsec_acme' })
    const lookup = cachedSecrets(load)
    const tenantOf = (request: { headers: unknown }) => String((request.headers as Record<string, string>)['x-tenant'])
    const receiver = createWebhookReceiver({
      secret: (request) => lookup(tenantOf(request)),
      endpoint: (request) => tenantOf(request),
      on: { 'message.received': async () => undefined },
      log: false,
    })
    const deliver = async (tenant: string) => {
      const signed = await signWebhook({ secret: 'svc_whsec_acme', event: sampleEvent('message.received') })
      return receiver.handle({ method: 'POST', body: signed.body, headers: { ...signed.headers, 'x-tenant': tenant } })
    }
    expect((await deliver('acme')).status).toBe(200)
    const unknown = await deliver('nobody')
    expect([unknown.status, JSON.parse(unknown.body)]).toEqual([404, { ok: false, code: 'unknown_endpoint' }])
    state.down = true
    const failed = await deliver('globex')
    expect([failed.status, JSON.parse(failed.body), failed.headers['retry-after']]).toEqual([503, { ok: false, code: 'secret_lookup_failed' }, '5'])
  })
})

// ---------------------------------------------------------------------------------------------

/** The rows of the first table under `header` (its first line) in `markdown`: cells, trimmed, code spans unwrapped. */
function table(markdown: string, header: string): string[][] {
  const start = markdown.indexOf(`${header}\n`)
  if (start < 0) throw new Error(`README: no table with header ${header}`)
  const rows: string[][] = []
  for (const line of markdown.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break
    rows.push(line.split(/(?<!\\)\|/).slice(1, -1).map((cell) => cell.trim()))
  }
  return rows
}

const unquote = (cell: string) => cell.replace(/^`|`$/g, '')
/** A cell as plain text, as the answers table writes it: code spans unwrapped, a link replaced by its text. */
const plain = (cell: string) => cell.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '')

describe('README tables', () => {
  it('the error table lists exactly the codes of ERROR_STATUS, each with the status, cause and fix of its row of ANSWERS', () => {
    const rows = table(section(readme, 'When deliveries are refused'), '| code | status | cause | fix |')
    const listed = Object.fromEntries(rows.map(([code, status, cause, fix]) => [unquote(code!), { status: Number(status), cause: plain(cause!), fix: plain(fix!) }]))
    expect(rows).toHaveLength(Object.keys(ERROR_STATUS).length)
    const codes = Object.keys(ERROR_STATUS) as (keyof typeof ERROR_STATUS)[]
    expect(listed).toEqual(Object.fromEntries(codes.map((code) => [code, { status: ERROR_STATUS[code], cause: ANSWERS[code].cause, fix: ANSWERS[code].fix }])))
  })

  it('the answers table has every row of ANSWERS but the 400/401/413 refusals, with Retry-After where sent', () => {
    const answers = table(section(readme, 'What the sender is told'), '| situation | status and body | handler |').map((row) => row[1]!)
    const refusals = new Set(Object.keys(ERROR_STATUS))
    // Refusals a sender retries (5xx), and the 404 of many endpoints: the 400/401/413 ones share a row.
    const named = Object.entries(ANSWERS).filter(([name, row]) => !refusals.has(name) || row.status >= 500 || row.status === 404)
    for (const [name, row] of named) {
      const expected = row.status < 300 ? `\`${row.status} ${JSON.stringify(row.body)}\`` : `\`${row.status} ${name}\``
      const hit = answers.find((cell) => cell.startsWith(expected))
      expect(hit, `README answers table: no row for ${name} (${expected})`).toBeDefined()
      if ('retryAfter' in row && row.retryAfter) expect(hit).toContain('Retry-After')
    }
    expect(named.map(([name]) => name)).toEqual(expect.arrayContaining(['accepted', 'body_timeout', 'unknown_endpoint', 'secret_lookup_failed']))
  })
})

// ---------------------------------------------------------------------------------------------

describe('README shape', () => {
  it('has at most 300 lines (detail goes to docs/)', () => {
    expect(readme.split('\n').length - (readme.endsWith('\n') ? 1 : 0)).toBeLessThanOrEqual(300)
  })

  it('has its pitch, install, Quick start, a test delivery and where to go next within 120 lines', () => {
    const lines = readme.split('\n')
    for (const title of ['Install', 'Quick start', 'Send it a test delivery', 'Where next']) expect(lines.indexOf(`## ${title}`), title).toBeGreaterThan(0)
    const next = lines.indexOf('## Where next')
    const end = lines.findIndex((line, i) => i > next + 2 && !line.startsWith('|'))
    expect(end, 'the where-next table ends by line 120').toBeLessThanOrEqual(120)
  })

  it('starts with a table of contents of its sections, in order', () => {
    const lines = readme.split('\n')
    const firstSection = lines.findIndex((line) => line.startsWith('## '))
    const toc = lines.slice(0, firstSection).filter((line) => /^- \[[^\]]+\]\(#[^)]+\)$/.test(line))
    expect(lines.slice(0, 12).some((line) => /^- \[[^\]]+\]\(#/.test(line)), 'a contents list within the first 12 lines').toBe(true)
    const sections = lines.filter((line) => line.startsWith('## ')).map((line) => `#${slug(line.slice(3))}`).filter((a) => a !== '#license')
    expect(toc.map((line) => /\((#[^)]+)\)/.exec(line)![1])).toEqual(sections)
  })
})
