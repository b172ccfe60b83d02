import { defineConfig } from 'vitest/config'

// Tests import the package by its name ('svc-webhooks', 'svc-webhooks/express', ...): they run
// against the built dist/ that users install (`npm test` builds first).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 180_000,
    server: { deps: { inline: [/svc-webhooks/] } },
  },
})
