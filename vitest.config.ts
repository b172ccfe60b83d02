import { defineConfig } from 'vitest/config'

// Tests import the package by its name ('svc-webhooks', 'svc-webhooks/express', ...): they run
// against the built dist/ that users install (`npm test` builds first).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A green run is a screen or two: a test's console output (the receivers' expected refusal
    // lines among it) is shown only when that test fails, where it helps find why.
    silent: 'passed-only',
    // Suites that start real servers and runtimes take seconds by design: list only the outliers.
    slowTestThreshold: 10_000,
    testTimeout: 30_000,
    hookTimeout: 180_000,
    server: { deps: { inline: [/svc-webhooks/] } },
  },
})
