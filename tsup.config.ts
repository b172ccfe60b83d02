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
    cli: 'src/cli/index.ts',
  }).filter(([, file]) => existsSync(file)),
)

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    testing: 'src/testing.ts',
    'crypto/node': 'src/crypto/node.ts',
    'crypto/web': 'src/crypto/web.ts',
    ...adapters,
    ...optional,
  },
  format: ['esm', 'cjs'],
  dts: true,
  splitting: true,
  sourcemap: false,
  clean: false, // several builds may run at once during development; `prepack` starts from an empty dist/
  target: 'es2022',
  platform: 'neutral',
  external: ['#crypto', /^node:/, /^svc-webhooks/],
})
