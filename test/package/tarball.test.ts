/**
 * What the tarball ships: every file something uses, and built-ins named as built-ins.
 *
 * - every file of dist/ is reached from package.json (exports, imports, bin) through the imports
 *   of the files it reaches: no CommonJS copy of the CLI, no types for the `#crypto` builds that
 *   no published type names. Shared chunks (chunk-*.js, name-<hash>.d.ts) are left out: a
 *   development dist/ keeps those of earlier builds (tsup's clean is off), which `npm pack`
 *   rebuilds away;
 * - every import of a Node.js built-in in dist/ keeps its `node:` prefix, which Deno, Bun and
 *   bundlers read as "built-in" (a bare `crypto` is a package name to them).
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, resolve } from 'node:path'
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

  it('ships no file of dist/ that nothing reaches', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>
    const targets = (value: unknown): string[] =>
      typeof value === 'string' ? [value] : value && typeof value === 'object' ? Object.values(value).flatMap(targets) : []
    const queue = [pkg.exports, pkg.imports, pkg.bin, pkg.main, pkg.module, pkg.types, pkg.typesVersions].flatMap(targets).map((t) => t.replace(/^\.\//, ''))
    const reached = new Set<string>()
    while (queue.length > 0) {
      const file = queue.pop()!
      if (reached.has(file) || !files.includes(file)) continue
      reached.add(file)
      const text = readFileSync(join(root, file), 'utf8')
      for (const m of text.matchAll(/(?:from |import\(|require\(|import )["'](\.{1,2}\/[^"']+)["']/g)) {
        const target = join(dirname(file), m[1]!)
        // A d.ts names `./chunk-X.js` for `./chunk-X.d.ts`.
        queue.push(target, target.replace(/\.js$/, '.d.ts'), target.replace(/\.cjs$/, '.d.cts'))
      }
    }
    expect(files.filter((f) => f.startsWith('dist/') && !/\/chunk-[\w-]+\.c?js$|-[\w-]{8}\.d\.c?ts$/.test(f) && !reached.has(f))).toEqual([])
  })

  it('imports Node.js built-ins by their node: names', () => {
    const bare = new RegExp(`(?:from |import\\(|require\\()"(${builtinModules.filter((m) => !m.startsWith('_')).join('|')})"`, 'g')
    const found = files
      .filter((f) => /\.(c?js|d\.c?ts)$/.test(f))
      .flatMap((f) => [...readFileSync(join(root, f), 'utf8').matchAll(bare)].map((m) => `${f}: "${m[1]}"`))
    expect(found).toEqual([])
  })
})
