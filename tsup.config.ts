import { existsSync, readdirSync } from 'node:fs'
import { defineConfig } from 'tsup'

// One entry per public subpath (package.json "exports"): the core, the test kit, each adapter in
// adapters/, the engines that need a client (Redis, Postgres, BullMQ, pg-boss: thin files in
// src/entries/ that re-export each subpath's public names), and the CLI. Outside the core,
// `#crypto` stays an import so package.json "imports" picks node:crypto or WebCrypto by export
// condition, never by sniffing at run time; the core is built once per crypto build (below).
const adapters = Object.fromEntries(
  readdirSync('adapters')
    .filter((file) => file.endsWith('.ts'))
    .map((file) => [file.slice(0, -3), `adapters/${file}`]),
)
const optional = Object.fromEntries(
  Object.entries({
    redis: 'src/entries/redis.ts',
    postgres: 'src/entries/postgres.ts',
    opentelemetry: 'src/opentelemetry.ts',
    bullmq: 'src/entries/bullmq.ts',
    'pg-boss': 'src/entries/pg-boss.ts',
    service: 'src/service/index.ts',
    history: 'src/history/index.ts',
    console: 'src/entries/console.ts',
  }).filter(([, file]) => existsSync(file)),
)

const shared = {
  dts: true,
  sourcemap: false,
  clean: false, // several builds may run at once during development; `prepack` starts from an empty dist/
  target: 'es2022',
  platform: 'neutral',
  // `node:crypto`, not `crypto`: the prefix is what Deno, Bun and bundlers recognise as a built-in.
  removeNodeProtocol: false,
} as const

const publicEntries = { index: 'src/index.ts', testing: 'src/testing.ts', ...adapters, ...optional }

const { index, ...splitEntries } = publicEntries

export default defineConfig([
  {
    ...shared,
    entry: { ...splitEntries, 'crypto/node': 'src/crypto/node.ts', 'crypto/web': 'src/crypto/web.ts' },
    // `#crypto` is resolved by package.json "imports" at run time; no published type names it.
    // The core's types are built here too, so every entry's declarations share one copy of each type.
    dts: { entry: publicEntries },
    format: ['esm', 'cjs'],
    splitting: true,
    external: ['#crypto', /^node:/, /^svc-webhooks/],
  },
  // The core, `import 'svc-webhooks'`: one file, no chunks, its crypto build inside. Each file an
  // ES module import loads costs a resolution, a read and a link (`#crypto`'s resolution through
  // package.json "imports" alone costs about 1 ms), and the split build made the core load eleven.
  // So the core is built twice, once per crypto build, and package.json "exports" picks one by the
  // same conditions as "imports" picks `#crypto`: node:crypto for Node.js, Bun and Deno, WebCrypto
  // for any other runtime. The adapters' chunks carry their own copy of the core's code, as the
  // CommonJS build always did: nothing in it is shared state that a copy could split (errors are
  // branded with Symbol.for, stores and inboxes are interfaces).
  ...(
    [
      ['index', 'src/crypto/node.ts'],
      ['index.web', 'src/crypto/web.ts'],
    ] as const
  ).map(([name, crypto]) => ({
    ...shared,
    entry: { [name]: index },
    format: ['esm', 'cjs'] as ('esm' | 'cjs')[],
    dts: false,
    splitting: false,
    external: [/^node:/, /^svc-webhooks/],
    esbuildOptions(options: { alias?: Record<string, string> }) {
      options.alias = { '#crypto': `./${crypto}` }
    },
  })),
  // The CLI is the package's `bin`, an ES module run by node: one file of its own, so that its
  // code shares no chunk with the library's entries (fewer files for an `import` to load) and no
  // CommonJS copy ships that nothing runs.
  {
    ...shared,
    entry: { cli: 'src/cli/index.ts' },
    format: ['esm'],
    dts: false,
    splitting: false,
    external: ['#crypto', /^node:/, /^svc-webhooks/],
  },
])
