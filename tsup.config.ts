import { existsSync, readdirSync } from 'node:fs'
import { defineConfig } from 'tsup'

// One entry per public subpath (package.json "exports"): the core, the test kit, each adapter in
// adapters/, the engines that need a client (Redis, Postgres, BullMQ, pg-boss: thin files in
// src/entries/ that re-export each subpath's public names), and the CLI. `#crypto` stays an import
// so package.json "imports" picks node:crypto or WebCrypto by export condition, never by sniffing
// at run time.
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

export default defineConfig([
  {
    ...shared,
    entry: { ...publicEntries, 'crypto/node': 'src/crypto/node.ts', 'crypto/web': 'src/crypto/web.ts' },
    // `#crypto` is resolved by package.json "imports" at run time; no published type names it.
    dts: { entry: publicEntries },
    format: ['esm', 'cjs'],
    splitting: true,
    external: ['#crypto', /^node:/, /^svc-webhooks/],
  },
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
