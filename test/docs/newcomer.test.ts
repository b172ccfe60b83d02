/**
 * What a newcomer meets before reading any further, kept true:
 *
 * - the README's Install names every entry that needs more than Node.js 20 (an optional peer
 *   whose `engines.node` asks for more), with that minimum;
 * - each name the README's API table lists for a subpath is a runtime export of it, and the test
 *   kit's row lists all of the kit's;
 * - `npm run demo` prints its first line within 2 s, built or not (it says it is building).
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '../..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string>; engines: { node: string }; scripts: Record<string, string> }

const minimum = (range: string) => /(\d+)(?:\.(\d+))?/.exec(range)!.slice(1).map((n) => Number(n ?? 0)) as [number, number]

describe('README: Install', () => {
  const install = readme.slice(readme.indexOf('\n## Install\n'), readme.indexOf('\n## ', readme.indexOf('\n## Install\n') + 1))
  const [ourMajor] = minimum(pkg.engines.node)

  it.each(Object.keys(pkg.peerDependencies))('names what %s needs beyond Node.js %s', (peer) => {
    const engines = (JSON.parse(readFileSync(join(root, 'node_modules', peer, 'package.json'), 'utf8')) as { engines?: { node?: string } }).engines?.node
    if (engines === undefined) return
    const [major, minor] = minimum(engines)
    if (major <= ourMajor) return
    expect(install, `${peer} declares node ${engines}: say so for its entry in the README's Install`).toContain(`svc-webhooks/${peer}`)
    expect(install).toContain(`${major}.${minor}+`)
  })
})

describe('README: API table', () => {
  const rows = [...readme.matchAll(/^\| `(svc-webhooks(?:\/[\w-]+)?)` \| (.*) \|$/gm)].map((m) => ({ entry: m[1]!, names: [...m[2]!.matchAll(/`(\w+)`/g)].map((n) => n[1]!) }))

  it('has rows', () => {
    expect(rows.map((r) => r.entry)).toContain('svc-webhooks/testing')
  })

  it.each(rows.map((r) => [r.entry, r] as const))('%s: every name listed is exported', async (entry, row) => {
    const exported = Object.keys((await import(/* @vite-ignore */ entry)) as object)
    // Lowercase names in the row are options and methods (`path`, `handle`), not exports.
    expect(row.names.filter((n) => /^[A-Z]|^[a-z]+[A-Z]/.test(n) && !exported.includes(n) && !['handle', 'receive', 'stats', 'secretBinding', 'onQueueResult'].includes(n))).toEqual([])
  })

  it('svc-webhooks/testing: every export is listed', async () => {
    const row = rows.find((r) => r.entry === 'svc-webhooks/testing')!
    expect(Object.keys(await import('svc-webhooks/testing')).filter((n) => !row.names.includes(n))).toEqual([])
  })
})

describe('npm run demo', () => {
  it('prints its first line within 2 s', async () => {
    expect(pkg.scripts.demo).toBe('node scripts/demo.mjs')
    const child = spawn(process.execPath, ['scripts/demo.mjs'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    const started = performance.now()
    try {
      const first = await new Promise<string>((done, fail) => {
        const timer = setTimeout(() => fail(new Error('nothing printed within 10 s')), 10_000)
        child.stdout.once('data', (chunk: Buffer) => {
          clearTimeout(timer)
          done(chunk.toString())
        })
      })
      expect(first).toMatch(/^svc-webhooks demo: /)
      expect(performance.now() - started).toBeLessThan(2000)
    } finally {
      // The demo, or the build it started: its whole process group.
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL')
    }
  })
})
