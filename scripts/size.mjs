#!/usr/bin/env node
// The size each edge entry adds to a Worker, measured the way a Workers bundler builds it:
// esbuild, --platform=neutral, the workerd/worker/browser conditions, minified, then gzip.
// Each entry has a target (what a Worker should pay) and a ceiling (today's size, a little
// rounded up): CI fails past the ceiling, so nothing grows unnoticed, and the table shows what is
// left to the target. `node scripts/size.mjs [--json]` after a build.
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'

const KB = 1024
/**
 * What a user's Worker imports, its target and its ceiling (bytes, gzip). The fix texts reach
 * only what prints them (the log line, the CLI), and the code is as tight as the behaviour allows
 * (docs/benchmarks.md, "tighter code"), so what stands between today and the target is code a
 * bundler cannot drop: for verify-only, the secret-source machinery (its cache, re-read and
 * pending rules: about 1.9 KB gzip; without it the entry is about 3.8 KB), which `verifyWebhook`
 * must carry while it accepts a source or a function as `secret`; past verify-only, the receiver
 * itself (dedupe with its default store, the inbox path, its log window and startup checks) and,
 * for the Cloudflare entry, the Queues producer and consumer `withWebhooks` offers.
 */
export const ENTRIES = [
  { name: 'verify-only (verifyWebhook)', code: "export { verifyWebhook } from 'svc-webhooks'", target: 4 * KB, ceiling: 5.8 * KB },
  { name: 'svc-webhooks/fetch (createFetchHandler)', code: "export { createFetchHandler } from 'svc-webhooks/fetch'", target: 10 * KB, ceiling: 14 * KB },
  { name: 'svc-webhooks/cloudflare (withWebhooks, DurableObjectStore)', code: "export { withWebhooks, DurableObjectStore } from 'svc-webhooks/cloudflare'", target: 12 * KB, ceiling: 18.1 * KB },
]

/** Minified and gzipped bytes of `code` bundled for workerd. */
export async function edgeSize(code, resolveDir = process.cwd()) {
  const result = await build({
    stdin: { contents: code, resolveDir, loader: 'js' },
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*', 'node:*'],
    minify: true,
    logLevel: 'error',
    // The package as installed (dist/, by its exports), not the sources this repository's tsconfig paths point at.
    tsconfigRaw: {},
  })
  const text = result.outputFiles[0].contents
  return { minified: text.length, gzip: gzipSync(text, { level: 9 }).length }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let over = 0
  const rows = []
  for (const entry of ENTRIES) {
    const size = await edgeSize(entry.code)
    const ok = size.gzip <= entry.ceiling
    if (!ok) over++
    rows.push({ entry: entry.name, ...size, target: entry.target, ceiling: entry.ceiling, ok })
  }
  if (process.argv.includes('--json')) console.log(JSON.stringify(rows))
  else {
    const kb = (n) => `${(n / 1024).toFixed(1)} KB`
    console.log('entry'.padEnd(62), 'min'.padStart(9), 'gzip'.padStart(9), 'target'.padStart(9), 'ceiling'.padStart(9))
    for (const r of rows) {
      const toGo = r.gzip > r.target ? `, ${kb(r.gzip - r.target)} over target` : ''
      console.log(r.entry.padEnd(62), kb(r.minified).padStart(9), kb(r.gzip).padStart(9), kb(r.target).padStart(9), kb(r.ceiling).padStart(9), r.ok ? `ok${toGo}` : 'OVER THE CEILING')
    }
  }
  if (over > 0) {
    console.error(`size: ${over} entr${over === 1 ? 'y has' : 'ies have'} grown past the ceiling: find what the entry newly bundles (esbuild --metafile)`)
    process.exit(1)
  }
}
