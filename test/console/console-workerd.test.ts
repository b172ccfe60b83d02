/**
 * The console inside real workerd (Miniflare): the Worker of docs/console.md (`// src/worker.ts`,
 * taken from the page as it is printed), bundled the way wrangler bundles it. The overview renders
 * with its CSP, a request without the token gets one word and no page, a cross-site POST is refused
 * and runs nothing, and a replay through the guarded form runs the handler once more. The same
 * file type-checks under `strict` against @cloudflare/workers-types, as wrangler users compile it.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signWebhook, sampleEvent } from 'svc-webhooks/testing'
import { blocksOf, root, WHOLE_FILE } from '../support/doc-blocks.js'
import { bundleWorker, startWorkerd, type WorkerdServer } from '../support/workerd.js'

const SECRET = 'svc_whsec_Y29uc29sZS13b3JrZXJkLXRlc3Qtc2VjcmV0LTMy'
const TOKEN = 'console-token-for-the-workerd-test'
const AUTH = { authorization: `Bearer ${TOKEN}` }

/** The page's Worker, exactly as printed. */
function workerOfThePage(): string {
  const block = blocksOf('docs/console.md').find((b) => WHOLE_FILE.exec(b.code)?.[1] === 'src/worker.ts')
  if (!block) throw new Error('docs/console.md has no `// src/worker.ts` block')
  return block.code
}

describe('the console in workerd (docs/console.md src/worker.ts)', () => {
  let worker: WorkerdServer
  let dir: string
  let base: string
  const id = `evt_console_workerd_${Date.now()}`
  const runs = () => worker.logs().split(`processed ${id}`).length - 1

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-console-workerd-'))
    writeFileSync(join(dir, 'worker.ts'), workerOfThePage())
    worker = await startWorkerd({ script: await bundleWorker(join(dir, 'worker.ts')), bindings: { SVC_WEBHOOK_SECRET: SECRET, CONSOLE_TOKEN: TOKEN } })
    base = `${worker.url}/admin/webhooks`
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id })
    const res = await fetch(`${worker.url}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
    expect(res.status, worker.logs()).toBe(200)
    await res.text()
    // The handler's log line reaches the runtime's stdout a moment after the answer.
    for (let i = 0; i < 100 && runs() < 1; i++) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(runs(), worker.logs()).toBe(1)
  })

  afterAll(async () => {
    await worker?.dispose()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('renders the overview with its CSP, the delivery listed', async () => {
    const res = await fetch(`${base}/`, { headers: AUTH })
    const page = await res.text()
    expect(res.status, worker.logs()).toBe(200)
    expect(res.headers.get('content-security-policy')).toMatch(/default-src 'none'/)
    expect(res.headers.get('x-frame-options')).toBe('DENY')
    expect(page).toContain(id)
  })

  it('refuses a request without the token, or with another, with no page content', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const res = await fetch(`${base}/`, { headers })
      const body = await res.text()
      expect([401, 403]).toContain(res.status)
      expect(body).not.toContain(id)
      expect(body).not.toMatch(/<html|<form|csrf/i)
    }
  })

  it('refuses a cross-site POST, and replays through the guarded form', async () => {
    const entry = await (await fetch(`${base}/entry?id=${id}`, { headers: AUTH })).text()
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(entry)?.[1]
    expect(csrf, entry).toBeDefined()
    const form = new URLSearchParams({ csrf: csrf!, do: 'replay', id, endpoint: 'default' }).toString()
    const post = (headers: Record<string, string>) =>
      fetch(`${base}/action`, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: form })

    for (const headers of [{ origin: 'https://evil.example' }, { origin: new URL(base).origin, 'sec-fetch-site': 'cross-site' }, {}] as Record<string, string>[]) {
      const refused = await post(headers)
      expect(refused.status, JSON.stringify(headers)).toBe(403)
      await refused.text()
    }
    expect(runs()).toBe(1)

    const replayed = await post({ origin: new URL(base).origin })
    expect(replayed.status, await replayed.clone().text()).toBe(200)
    await replayed.text()
    await expect.poll(runs).toBe(2)
  })

  it('type-checks under strict against @cloudflare/workers-types, with skipLibCheck off', () => {
    const project = join(dir, 'typed')
    mkdirSync(join(project, 'src'), { recursive: true })
    mkdirSync(join(project, 'node_modules/@cloudflare'), { recursive: true })
    symlinkSync(root, join(project, 'node_modules/svc-webhooks'), 'dir')
    symlinkSync(join(root, 'node_modules/@cloudflare/workers-types'), join(project, 'node_modules/@cloudflare/workers-types'), 'dir')
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'console-worker', version: '1.0.0', type: 'module' }))
    writeFileSync(join(project, 'src/worker.ts'), workerOfThePage())
    const compilerOptions = { target: 'es2022', module: 'es2022', moduleResolution: 'bundler', lib: ['es2022'], types: ['@cloudflare/workers-types'], strict: true, skipLibCheck: false, noEmit: true }
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src'] }))
    const out = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', project, '--pretty', 'false'], { cwd: project, encoding: 'utf8' })
    expect(out.stdout + out.stderr).toBe('')
    expect(out.status).toBe(0)
  }, 120_000)
})
