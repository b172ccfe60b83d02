/**
 * What users install, read from the built dist/ and package.json: the package imported by name as
 * ESM and required as CJS, `#crypto` resolving to the node:crypto build under Node in both,
 * `svc-webhooks/testing` from both, WebhookEventMap augmentation through the built .d.ts
 * re-exports (ESM and CJS types); each subpath's module graph pulling in only its own framework,
 * the core importing no `node:` module outside the `#crypto` node condition, and the core's size.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { gzipSync } from 'node:zlib'
import { buildSync } from 'esbuild'
import { afterAll, describe, expect, it } from 'vitest'
import * as esm from 'svc-webhooks'
import * as esmTesting from 'svc-webhooks/testing'

const root = resolve(import.meta.dirname, '../..')
const require = createRequire(import.meta.url)
const dist = (file: string) => join(root, 'dist', file)
const SECRET = 'svc_whsec_PackageTestSecret'

describe('CommonJS', () => {
  const cjs = require('svc-webhooks') as typeof esm
  const cjsTesting = require('svc-webhooks/testing') as typeof esmTesting

  it('require resolves the .cjs builds', () => {
    expect(require.resolve('svc-webhooks')).toBe(dist('index.cjs'))
    expect(require.resolve('svc-webhooks/testing')).toBe(dist('testing.cjs'))
  })

  it('#crypto resolves to, and loaded, the node:crypto build; the WebCrypto one is never loaded', () => {
    expect(createRequire(dist('index.cjs')).resolve('#crypto')).toBe(dist('crypto/node.cjs'))
    const loaded = Object.keys(require.cache)
    expect(loaded).toContain(dist('crypto/node.cjs'))
    expect(loaded).not.toContain(dist('crypto/web.cjs'))
  })

  it('exports the same names as the ESM build', () => {
    expect(Object.keys(cjs).sort()).toEqual(Object.keys(esm).sort())
    expect(Object.keys(cjsTesting).sort()).toEqual(Object.keys(esmTesting).sort())
    expect(Object.keys(esm)).toEqual(expect.arrayContaining(['verifyWebhook', 'verifySignature', 'createWebhookReceiver', 'MemoryStore', 'WebhookVerificationError', 'isWebhookVerificationError']))
    expect(Object.keys(esmTesting)).toEqual(expect.arrayContaining(['signWebhook', 'sampleEvent', 'serializeEvent']))
  })

  it('a delivery signed by one build verifies in the other', async () => {
    const event = cjsTesting.sampleEvent('message.received')
    const fromCjs = await cjsTesting.signWebhook({ secret: SECRET, event })
    const fromEsm = await esmTesting.signWebhook({ secret: SECRET, event, id: fromCjs.id, timestamp: fromCjs.timestamp })
    expect(fromEsm.headers).toEqual(fromCjs.headers)
    const a = await esm.verifyWebhook({ body: fromCjs.rawBody, headers: fromCjs.headers }, { secret: SECRET })
    const b = await cjs.verifyWebhook({ body: fromEsm.body, headers: fromEsm.headers }, { secret: SECRET })
    expect(a.event).toEqual(event)
    expect(b.event).toEqual(event)
    const receiver = cjs.createWebhookReceiver({ secret: SECRET, store: new cjs.MemoryStore(), on: { 'message.received': () => {} } })
    expect((await receiver.handle({ method: 'POST', body: fromEsm.rawBody, headers: fromEsm.headers })).status).toBe(200)
  })
})

describe('ES modules under plain Node (no bundler between)', () => {
  it('import by name resolves dist/*.js, #crypto to dist/crypto/node.js, and verifies', () => {
    // Node's own resolver, from inside the package scope (as dist/index.js resolves `#crypto`).
    // Not a resolve hook: hooks run off-thread from Node 22 on, and their output can be lost at exit.
    const script = `
      for (const specifier of ['svc-webhooks', 'svc-webhooks/testing', '#crypto']) {
        console.log('resolved ' + specifier + ' ' + import.meta.resolve(specifier))
      }
      const { verifyWebhook } = await import('svc-webhooks')
      const { signWebhook, sampleEvent } = await import('svc-webhooks/testing')
      const signed = await signWebhook({ secret: '${SECRET}', event: sampleEvent('message.received') })
      const delivery = await verifyWebhook({ body: signed.rawBody, headers: signed.headers }, { secret: '${SECRET}' })
      console.log('verified ' + delivery.signatureVersion + ' ' + delivery.event.event)`
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', timeout: 20_000 })
    const url = (file: string) => `file://${dist(file)}`
    expect(out).toContain(`resolved svc-webhooks ${url('index.js')}`)
    expect(out).toContain(`resolved svc-webhooks/testing ${url('testing.js')}`)
    expect(out).toContain(`resolved #crypto ${url('crypto/node.js')}`)
    expect(out).not.toContain('crypto/web.js')
    expect(out).toContain('verified v2 message.received')
  })
})

describe('a runtime without process.getBuiltinModule (Node < 20.16)', () => {
  // The node:crypto build takes its built-ins from process.getBuiltinModule; without it, it loads
  // them by dynamic import at the first secret, and verifications answer once they are there.
  const script = (load: (name: string) => string) => `
    delete process.getBuiltinModule
    const { verifyWebhook, isWebhookVerificationError } = ${load('svc-webhooks')}
    const { signWebhook, sampleEvent } = ${load('svc-webhooks/testing')}
    const outcome = (request, secret) => verifyWebhook(request, { secret }).then(
      (d) => 'verified ' + d.signatureVersion + ' ' + d.event.event,
      (e) => (isWebhookVerificationError(e) ? 'refused ' + e.code : 'threw ' + e))
    const signed = await signWebhook({ secret: '${SECRET}', event: sampleEvent('message.received') })
    const request = { body: signed.rawBody, headers: signed.headers }
    // The first two before the built-ins arrive, at once; the third after.
    const first = await Promise.all([outcome(request, '${SECRET}'), outcome(request, 'svc_whsec_AnotherSecret')])
    const invalid = await signWebhook({ secret: '${SECRET}', body: new Uint8Array([0x7b, 0xff, 0x7d]) })
    console.log([...first, await outcome(request, '${SECRET}'), await outcome({ body: invalid.rawBody, headers: invalid.headers }, '${SECRET}')].join('\\n'))`
  const run = (args: string[], load: (name: string) => string) =>
    execFileSync(process.execPath, [...args, '-e', `(async () => {${script(load)}})().catch((e) => { console.error(e); process.exit(1) })`], { cwd: root, encoding: 'utf8', timeout: 20_000 }).trim().split('\n')
  const expected = ['verified v2 message.received', 'refused invalid_signature', 'verified v2 message.received', 'refused invalid_json']

  it('ES modules: the built-ins load at the first secret, and deliveries verify or are refused as usual', () => {
    expect(run(['--input-type=module'], (name) => `await import('${name}')`)).toEqual(expected)
  })

  it('CommonJS: the same', () => {
    expect(run([], (name) => `require('${name}')`)).toEqual(expected)
  })
})

describe('types as installed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-types-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('WebhookEventMap augmentation works through the built .d.ts re-exports, for ESM and CJS consumers', () => {
    mkdirSync(join(dir, 'node_modules'))
    symlinkSync(root, join(dir, 'node_modules', 'svc-webhooks'), 'dir')
    const consumer = (importLine: string) => `${importLine}
declare module 'svc-webhooks' {
  interface WebhookEventMap { 'template.approved': { event: 'template.approved'; template_id: string } }
}
createWebhookReceiver({
  secret: 'svc_whsec_x',
  on: {
    'message.received': (event) => { const text: string = event.message.text; void text },
    'template.approved': (event, delivery) => { const id: string = event.template_id; void id; void delivery.rawBody },
  },
})
// @ts-expect-error still refuses an unknown key
createWebhookReceiver({ secret: 'svc_whsec_x', on: { 'template.aproved': () => {} } })
// @ts-expect-error the augmented payload is typed, not any
createWebhookReceiver({ secret: 'svc_whsec_x', on: { 'template.approved': (event) => { const n: number = event.template_id; void n } } })
export {}
`
    writeFileSync(join(dir, 'esm.mts'), consumer(`import { createWebhookReceiver } from 'svc-webhooks'`))
    // In a .cts file the same import compiles to require() and resolves the "require" types (.d.cts).
    writeFileSync(join(dir, 'cjs.cts'), consumer(`import { createWebhookReceiver } from 'svc-webhooks'`))
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, module: 'node16', moduleResolution: 'node16', noEmit: true, skipLibCheck: true, types: [], lib: ['ES2023', 'DOM'] },
        files: ['esm.mts', 'cjs.cts'],
      }),
    )
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    let output: string
    try {
      output = execFileSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8', timeout: 60_000 })
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error)
    }
    expect(output).toBe('')
  })
})

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, { import: { default: string } } | string>
  dependencies?: Record<string, string>
}

/** Every file reachable from `entry` through relative imports, and every bare import seen. */
function graph(entry: string): { files: Set<string>; bare: Set<string> } {
  const files = new Set<string>()
  const bare = new Set<string>()
  const queue = [entry]
  while (queue.length > 0) {
    const file = queue.pop()!
    if (files.has(file)) continue
    files.add(file)
    const source = readFileSync(file, 'utf8')
    for (const match of source.matchAll(/(?:import|export)\s*(?:[^'"]*?\s*from\s*)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
      const spec = match[1] ?? match[2]!
      if (spec.startsWith('.')) queue.push(resolve(dirname(file), spec))
      else bare.add(spec)
    }
  }
  return { files, bare }
}

// bullmq and pg-boss too: their entries take the user's Queue and PgBoss by their methods and import neither.
// @opentelemetry/api is an optional peer dependency: only svc-webhooks/opentelemetry may import it.
const FRAMEWORKS = ['express', 'hono', 'fastify', 'koa', 'next', 'ioredis', 'redis', 'pg', '@hono/node-server', 'bullmq', 'pg-boss', '@opentelemetry/api']
const OWN: Record<string, string[]> = {
  express: ['express'],
  hono: ['hono'],
  fastify: ['fastify'],
  koa: ['koa'],
  next: ['next'],
  redis: ['ioredis', 'redis'],
  postgres: ['pg'],
  opentelemetry: ['@opentelemetry/api'],
}
const subpaths = Object.entries(pkg.exports)
  .filter(([key, value]) => key !== './package.json' && typeof value !== 'string')
  .map(([key, value]) => ({ name: key === '.' ? 'index' : key.slice(2), file: join(root, (value as { import: { default: string } }).import.default) }))
  .filter(({ file }) => existsSync(file))

describe('package boundaries (built dist/)', () => {
  it('the core has zero runtime dependencies', () => {
    expect(pkg.dependencies ?? {}).toEqual({})
  })

  it.each(subpaths)('$name pulls in no other framework', ({ name, file }) => {
    const { bare } = graph(file)
    const allowed = new Set(OWN[name] ?? [])
    const foreign = [...bare].filter((spec) => FRAMEWORKS.some((fw) => (spec === fw || spec.startsWith(`${fw}/`)) && !allowed.has(fw)))
    expect(foreign).toEqual([])
  })

  it('the core imports no node: module but behind the node condition (its node:crypto build, and #crypto\'s)', () => {
    // The `default` build of the core (any runtime with WebCrypto) and `#crypto`'s: no import at all.
    expect([...graph(join(root, 'dist/index.web.js')).bare]).toEqual([])
    expect(graph(join(root, 'dist/crypto/web.js')).bare.size).toBe(0)
    // The `node` build (Node.js, Bun, Deno): its crypto build's built-ins and nothing else, and
    // those by dynamic import only, where process.getBuiltinModule is missing: no static import,
    // so `import 'svc-webhooks'` builds no ES module wrapper of a built-in (about 0.3 ms each).
    expect([...graph(join(root, 'dist/index.js')).bare].sort()).toEqual(['node:buffer', 'node:crypto'])
    expect(readFileSync(join(root, 'dist/index.js'), 'utf8')).not.toMatch(/^import\b/m)
    const exported = pkg.exports['.'] as unknown as Record<'import' | 'require', Record<string, string>>
    for (const kind of ['import', 'require'] as const) {
      const { types, node, bun, deno, default: other } = exported[kind]!
      expect({ types, bun, deno, default: other }).toEqual({ types: `./dist/index.d.${kind === 'import' ? 'ts' : 'cts'}`, bun: node, deno: node, default: node!.replace('index.', 'index.web.') })
    }
  })

  it('the core stays within its size budget (24 KiB minified and gzipped, svc-webhooks bundled into one file: verification, the request path with its bounded readers, secret sources, the answers table, the log window, MemoryStore with its own hash index, MemoryInbox and the inbox worker with its fault handling, order within a conversation and flow control; each is tree-shaken out of an app that does not import it)', () => {
    // Bundled and minified, as an app's bundler ships it: summing the gzip of each chunk would
    // count the compression dictionary once per chunk, and unminified the budget would count
    // the JSDoc that esbuild keeps inside classes and object literals. The answers' texts sit
    // apart from their rows (src/answer-texts.ts), which costs this whole bundle about 0.3 KiB and
    // saves an edge bundle that only verifies about 1.5 KiB (scripts/size.mjs).
    const [bundle] = buildSync({ entryPoints: [join(root, 'dist/index.web.js')], bundle: true, minify: true, logLevel: 'error', write: false, format: 'esm', platform: 'neutral', external: ['#crypto', 'node:*'] }).outputFiles
    // 19 KiB until the secret source's pending rules (marks timed per id, a mismatch held while
    // the source is re-read) came into the request path: about 0.2 KiB more. 20 KiB until order
    // within a conversation and flow control (MemoryInbox's ordered take, the worker's ordered
    // take and flow gate): about 2.9 KiB more. 23 KiB until history (the receiver's and the
    // worker's record calls and replay), the one engine wait with its bound on held requests, and
    // verify-only's refusal lines: about 0.6 KiB more.
    expect(gzipSync(bundle!.contents).byteLength).toBeLessThan(24 * 1024)
  })
})
