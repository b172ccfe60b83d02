/**
 * What users install: each subpath's built module graph pulls in only its own framework, the
 * core imports no `node:` module outside the `#crypto` node condition, and the core stays small.
 */
import { readFileSync, existsSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { dirname, join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '..')
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

const FRAMEWORKS = ['express', 'hono', 'fastify', 'next', 'ioredis', 'redis', 'pg', '@hono/node-server']
const OWN: Record<string, string[]> = {
  express: ['express'],
  hono: ['hono'],
  fastify: ['fastify'],
  next: ['next'],
  redis: ['ioredis', 'redis'],
  postgres: ['pg'],
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

  it('the core entry imports no node: module (node:crypto only behind the #crypto node condition)', () => {
    const { bare } = graph(join(root, 'dist/index.js'))
    expect([...bare].filter((spec) => spec.startsWith('node:'))).toEqual([])
    expect(graph(join(root, 'dist/crypto/web.js')).bare.size).toBe(0)
  })

  it('the core stays within its size budget (11 KiB gzipped, ESM graph of svc-webhooks: verification, the request path with its bounded readers, the answers table, MemoryStore)', () => {
    const { files } = graph(join(root, 'dist/index.js'))
    const bytes = [...files].reduce((sum, file) => sum + gzipSync(readFileSync(file)).byteLength, 0)
    expect(bytes).toBeLessThan(11 * 1024)
  })
})
