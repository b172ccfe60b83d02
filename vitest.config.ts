import { availableParallelism } from 'node:os'
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
    // At least two files at once: most suites wait on servers and child processes, not the CPU, and
    // vitest's default (one fewer than the cores) runs them one by one on a two-core machine.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 180_000,
    server: { deps: { inline: [/svc-webhooks/] } },
  },
})
