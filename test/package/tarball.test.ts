/**
 * What the tarball ships: every file something uses, and built-ins named as built-ins.
 *
 * - no CommonJS copy of the CLI (the `bin` is dist/cli.js, an ES module): nothing would run it;
 * - every import of a Node.js built-in in dist/ keeps its `node:` prefix, which Deno, Bun and
 *   bundlers read as "built-in" (a bare `crypto` is a package name to them).
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '../..')

describe('the packed tarball', () => {
  const packed = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' })
  const files: string[] = packed.status === 0 ? (JSON.parse(packed.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path) : []

  it('lists its files', () => {
    expect(packed.status, packed.stderr).toBe(0)
    expect(files).toContain('dist/cli.js')
  })

  it('ships no CommonJS CLI', () => {
    expect(files.filter((f) => /^dist\/cli\.c?[jt]s$|^dist\/cli\.d\./.test(f))).toEqual(['dist/cli.js'])
  })

  it('imports Node.js built-ins by their node: names', () => {
    const bare = new RegExp(`(?:from |import\\(|require\\()"(${builtinModules.filter((m) => !m.startsWith('_')).join('|')})"`, 'g')
    const found = files
      .filter((f) => /\.(c?js|d\.c?ts)$/.test(f))
      .flatMap((f) => [...readFileSync(join(root, f), 'utf8').matchAll(bare)].map((m) => `${f}: "${m[1]}"`))
    expect(found).toEqual([])
  })
})
