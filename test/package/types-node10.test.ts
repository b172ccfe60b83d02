/**
 * Types for TypeScript projects that still resolve modules the old way (`"module": "commonjs"`,
 * which implies `moduleResolution: node10`): that resolution ignores `exports`, so every subpath
 * needs a `typesVersions` entry. The entries are derived from `exports` and checked here, so a new
 * subpath cannot ship without its types; then tsc resolves every subpath in such a project.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '../..')

type Conditions = { require?: { types?: string } }
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, Conditions | string>
  typesVersions?: Record<string, Record<string, string[]>>
}

/** The subpaths of `exports` (not the root, not package.json), each with its CommonJS types. */
const subpaths = Object.entries(pkg.exports)
  .filter(([key, value]) => key !== '.' && typeof value !== 'string')
  .map(([key, value]) => [key.slice(2), (value as Conditions).require?.types] as const)

describe('types under moduleResolution node10', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-node10-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('typesVersions maps every subpath of exports to its CommonJS types, and nothing else', () => {
    const expected = { '*': Object.fromEntries(subpaths.map(([name, types]) => [name, [types]])) }
    expect(
      pkg.typesVersions,
      `package.json "typesVersions" must be exactly (derived from "exports"; paste it after "exports"):\n${JSON.stringify(expected, null, 2)}\n`,
    ).toEqual(expected)
  })

  it('tsc resolves the root and every subpath in a "module": "commonjs" project', () => {
    mkdirSync(join(dir, 'node_modules'))
    symlinkSync(root, join(dir, 'node_modules', 'svc-webhooks'), 'dir')
    const imports = ['svc-webhooks', ...subpaths.map(([name]) => `svc-webhooks/${name}`)]
      .filter((name) => name !== 'svc-webhooks/package.json')
      .map((name, i) => `import * as m${i} from '${name}'\nvoid m${i}`)
    writeFileSync(join(dir, 'index.ts'), `${imports.join('\n')}\nexport {}\n`)
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        // What `tsc --init` wrote for years, and many CommonJS projects still have.
        compilerOptions: { strict: true, module: 'commonjs', target: 'es2022', esModuleInterop: true, noEmit: true, skipLibCheck: true, types: [], lib: ['ES2023', 'DOM'] },
        files: ['index.ts'],
      }),
    )
    let output: string
    try {
      output = execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir, '--pretty', 'false'], { encoding: 'utf8', timeout: 60_000, stdio: 'pipe' })
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error)
    }
    expect(output).toBe('')
  })
})
