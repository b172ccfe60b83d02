import { defineConfig } from 'vitest/config'

// The runtime matrix (scripts/test-runtimes.mjs, `npm run test:runtimes`): a separate config so
// the main `vitest run` does not start five runtimes. Like the main suite, it tests the built dist/.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/runtimes/*.matrix.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    server: { deps: { inline: [/svc-webhooks/] } },
  },
})
