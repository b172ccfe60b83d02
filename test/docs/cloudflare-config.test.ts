/**
 * docs/cloudflare.md's Worker holds up as `wrangler types` and `wrangler deploy` would read it:
 *
 * - its wrangler.toml names `name`, `main` (the page's Worker file) and `compatibility_date`, and
 *   every Durable Object binding's class is migrated;
 * - the page's src/worker.ts type-checks under `strict` and `skipLibCheck: false` against the
 *   `Env` that `wrangler types` writes for that toml (each Durable Object binding as
 *   `DurableObjectNamespace<import("./src/worker").ClassName>`, which asks the class for
 *   workers-types' `DurableObjectBranded`) and @cloudflare/workers-types.
 *
 * The same Worker is bundled and run in workerd by docs.test.ts.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { blocksOf, root, WHOLE_FILE } from '../support/doc-blocks.js'

const blocks = blocksOf('docs/cloudflare.md')
const toml = blocks.find((b) => b.lang === 'toml' && b.code.startsWith('# wrangler.toml\n'))!.code
const worker = blocks.find((b) => WHOLE_FILE.exec(b.code)?.[1] === 'src/worker.ts')!.code
const value = (key: string) => new RegExp(`^${key} = "([^"]+)"$`, 'm').exec(toml)?.[1]
const durableObjects = [...toml.matchAll(/name = "(\w+)"\nclass_name = "(\w+)"/g)].map((m) => ({ binding: m[1]!, className: m[2]! }))

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-cloudflare-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('docs/cloudflare.md: wrangler.toml', () => {
  it('names the Worker, its main module and a compatibility date', () => {
    expect(value('name')).toMatch(/^[a-z0-9-]+$/)
    expect(value('main')).toBe('src/worker.ts')
    expect(value('compatibility_date')).toMatch(/^\d{4}-\d{2}-\d{2}$/)
  })

  it('binds and migrates the Durable Object the Worker exports', () => {
    expect(durableObjects).toEqual([{ binding: 'WEBHOOK_IDEMPOTENCY', className: 'WebhookIdempotencyObject' }])
    expect(toml).toMatch(/new_sqlite_classes = \["WebhookIdempotencyObject"\]/)
    expect(worker).toContain('export { WebhookIdempotencyObject }')
  })
})

describe('docs/cloudflare.md: src/worker.ts', () => {
  it('type-checks against the Env `wrangler types` writes, with skipLibCheck off', () => {
    mkdirSync(join(dir, 'src'), { recursive: true })
    mkdirSync(join(dir, 'node_modules/@cloudflare'), { recursive: true })
    symlinkSync(root, join(dir, 'node_modules/svc-webhooks'), 'dir')
    symlinkSync(join(root, 'node_modules/@cloudflare/workers-types'), join(dir, 'node_modules/@cloudflare/workers-types'), 'dir')
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'worker', version: '1.0.0', type: 'module' }))
    writeFileSync(join(dir, 'src/worker.ts'), worker)
    // What `wrangler types` writes for this toml: the bindings, and the secret `wrangler secret put` sets.
    const bindings = durableObjects.map((d) => `  ${d.binding}: DurableObjectNamespace<import("./src/worker").${d.className}>;`)
    writeFileSync(join(dir, 'worker-configuration.d.ts'), `interface Env {\n${bindings.join('\n')}\n  SVC_WEBHOOK_SECRET: string;\n}\n`)
    const compilerOptions = { target: 'es2022', module: 'es2022', moduleResolution: 'bundler', lib: ['es2022'], types: ['@cloudflare/workers-types'], strict: true, skipLibCheck: false, noEmit: true }
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src', 'worker-configuration.d.ts'] }))
    const out = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8' })
    expect(out.stdout + out.stderr).toBe('')
    expect(out.status).toBe(0)
  }, 120_000)
})
