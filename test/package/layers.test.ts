/**
 * The layers of src/, bottom first, and the rule that holds them: a module imports its own layer
 * or the ones below, never one above, and no chain of imports comes back to where it started.
 * The import graph is read from the source text (`import … from './…'` and `export … from './…'`
 * lines), so the check needs no build. Type-only imports count for the layers (a type from above
 * is a dependency on above) and for cycles: a cycle of type-only imports is erased by the build,
 * but a reader still has to hold both files at once, so only the ones listed here are tolerated.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, posix, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const SRC = join(ROOT, 'src')

/**
 * Bottom first. A file belongs to the entry naming it, or to the longest folder naming it. A
 * layer's modules may import its own layer and those before it.
 */
const LAYERS: readonly (readonly [name: string, members: readonly string[]])[] = [
  // Leaves: the answers table, the error class, events, headers, raw input, logging text, crypto.
  ['foundation', ['answers.ts', 'answer-texts.ts', 'errors.ts', 'events.ts', 'base64.ts', 'log-window.ts', 'telemetry.ts', 'option-checks.ts', 'headers.ts', 'input.ts', 'crypto/']],
  // Verifying a delivery (and signing one, as the service does). The secret path is one folder
  // (the list, the source contract, the cache and its pending rules) that options and the verify
  // path import, and that imports neither.
  ['verification', ['secrets/', 'options.ts', 'read-body.ts', 'signature.ts', 'verify.ts', 'transport.ts', 'signing.ts']],
  // What engines, the receiver and the service implement or call: handlers, store, inbox, watch.
  ['contracts', ['contracts/']],
  // Shared by the core and the engines: claim → run → complete, lines and counters, engine clients.
  ['support', ['claim.ts', 'visibility.ts', 'inbox/text.ts', 'stores/source-state.ts', 'clients/']],
  // Processing: the inbox worker's one path, the Queues inbox and consumer, the in-memory engines.
  ['processing', ['inbox/', 'stores/memory.ts', 'stores/durable-object.ts', 'history/']],
  // The request path. Nothing but the entries imports it: handlers and contracts live below.
  ['receiver', ['receiver.ts', 'verify-only.ts']],
  // Engines that need a client: Redis, Postgres, BullMQ, pg-boss.
  ['engines', ['stores/', 'inbox/redis.ts', 'inbox/redis-scripts.ts', 'inbox/redis-order.ts', 'inbox/redis-order-scripts.ts', 'inbox/postgres.ts', 'inbox/postgres-sql.ts', 'inbox/postgres-order.ts', 'inbox/postgres-order-sql.ts', 'engines/', 'history/redis.ts', 'history/redis-scripts.ts', 'history/postgres.ts', 'history/postgres-sql.ts']],
  // The service's API: client, endpoint watch, rotation, emulator.
  ['service', ['service/']],
  // The operator's console: reads every part above through their public shapes.
  ['console', ['console/']],
  // What package.json exports: thin entry files, and the CLI.
  ['entries', ['index.ts', 'testing.ts', 'opentelemetry.ts', 'entries/', 'cli/', 'history/index.ts']],
]

/** The layer index of a path relative to src/ (posix), or -1. */
function layerOf(file: string): number {
  let best = -1
  let length = -1
  LAYERS.forEach(([, members], index) => {
    for (const member of members) {
      const hit = member.endsWith('/') ? file.startsWith(member) : file === member
      if (hit && member.length > length) {
        best = index
        length = member.length
      }
    }
  })
  return best
}

interface Edge {
  from: string
  to: string
  typeOnly: boolean
}

/** Every .ts file under `dir`, relative to src/, posix separators. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sources(path)
    return entry.name.endsWith('.ts') ? [relative(SRC, path).split('\\').join('/')] : []
  })
}

// `import …from './x.js'` and `export …from './x.js'`, across lines; `type` before the braces, or
// before every name in them, makes it type-only.
const STATEMENT = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;'"]*?)\s+from\s+'(\.{1,2}\/[^']+)'/g

/** The relative imports of `file`: which module, and whether only types are taken. */
export function importsOf(file: string, text: string): Edge[] {
  const edges: Edge[] = []
  for (const match of text.matchAll(STATEMENT)) {
    const [, , typeKeyword, clause, specifier] = match
    const names = /^\{([\s\S]*)\}$/.exec(clause!.trim())?.[1]?.split(',').map((name) => name.trim()).filter(Boolean)
    const typeOnly = typeKeyword !== undefined || (names !== undefined && names.length > 0 && names.every((name) => name.startsWith('type ')))
    const to = posix.normalize(posix.join(posix.dirname(file), specifier!)).replace(/\.js$/, '.ts')
    edges.push({ from: file, to, typeOnly })
  }
  return edges
}

/** Each cycle of `edges` once, as the list of its modules (Tarjan's strongly connected components). */
function cycles(files: readonly string[], edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>(files.map((file) => [file, []]))
  for (const { from, to } of edges) next.get(from)?.push(to)
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  let counter = 0
  const visit = (node: string): void => {
    index.set(node, counter)
    low.set(node, counter++)
    stack.push(node)
    onStack.add(node)
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to)
        low.set(node, Math.min(low.get(node)!, low.get(to)!))
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!))
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = []
      for (let top = stack.pop()!; ; top = stack.pop()!) {
        onStack.delete(top)
        component.push(top)
        if (top === node) break
      }
      if (component.length > 1 || next.get(node)!.includes(node)) found.push(component.sort())
    }
  }
  for (const file of files) if (!index.has(file)) visit(file)
  return found
}

/**
 * The type-only cycles still tolerated, each as its sorted modules. The secret path's
 * (`options.ts` and the secret cache) is gone: src/secrets/ imports neither options nor verify.
 */
const TOLERATED_TYPE_CYCLES: readonly (readonly string[])[] = [
  // None left: verify-only mode (src/verify-only.ts) is apart from the transport type it drives.
]

const files = sources(SRC).sort()
const edges = files.flatMap((file) => importsOf(file, readFileSync(join(SRC, file), 'utf8')))

describe('the layers of src/', () => {
  it('reads an import graph (the parser finds the imports it should)', () => {
    const sample = importsOf('inbox/x.ts', "import type { A } from '../a.js'\nimport {\n  b,\n  type C,\n} from './b.js'\nexport { type D, type E } from '../d.js'\nexport * from './e.js'\n")
    expect(sample).toEqual([
      { from: 'inbox/x.ts', to: 'a.ts', typeOnly: true },
      { from: 'inbox/x.ts', to: 'inbox/b.ts', typeOnly: false },
      { from: 'inbox/x.ts', to: 'd.ts', typeOnly: true },
      { from: 'inbox/x.ts', to: 'inbox/e.ts', typeOnly: false },
    ])
    expect(edges.length).toBeGreaterThan(100)
  })

  it('places every module in a layer, and every import reaches a module', () => {
    expect(files.filter((file) => layerOf(file) < 0)).toEqual([])
    expect(edges.filter(({ to }) => !files.includes(to)).map(({ from, to }) => `${from} -> ${to}`)).toEqual([])
  })

  it('has no import running back up a layer', () => {
    const upward = edges
      .filter(({ from, to }) => layerOf(to) > layerOf(from))
      .map(({ from, to }) => `${from} (${LAYERS[layerOf(from)]![0]}) imports ${to} (${LAYERS[layerOf(to)]![0]})`)
    expect(upward, `${upward.length} import(s) running back up`).toEqual([])
  })

  it('has no cycle of imports that survives the build', () => {
    expect(cycles(files, edges.filter(({ typeOnly }) => !typeOnly))).toEqual([])
  })

  it('has no cycle of type-only imports but the tolerated ones; the secret path has none', () => {
    expect(cycles(files, edges)).toEqual(TOLERATED_TYPE_CYCLES)
    const secretPath = edges.filter(({ from }) => from.startsWith('secrets/')).map(({ to }) => to)
    expect(secretPath.filter((to) => !to.startsWith('secrets/') && layerOf(to) >= layerOf('options.ts')).sort()).toEqual([])
  })
})
