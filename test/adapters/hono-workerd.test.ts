/**
 * `svc-webhooks/hono` inside real workerd (Miniflare): the case table over HTTP against a Hono
 * app bundled the way wrangler bundles it (Workers export conditions: WebCrypto, no node:crypto).
 */
import { afterAll } from 'vitest'
import { describeCaseTable } from '../support/case-table.js'
import { bundleWorker, startWorkerd, type WorkerdServer } from '../support/workerd.js'

let server: WorkerdServer | undefined

afterAll(async () => {
  await server?.dispose()
})

describeCaseTable('hono (workerd)', async () => {
  server = await startWorkerd({ script: await bundleWorker('test/adapters/hono-workerd.worker.ts') })
  return { url: server.url }
})
