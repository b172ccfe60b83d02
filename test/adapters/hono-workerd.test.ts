/**
 * `svc-webhooks/hono` inside real workerd (Miniflare): the case table over HTTP against a Hono
 * app bundled the way wrangler bundles it (Workers export conditions: WebCrypto, no node:crypto).
 */
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { bundleWorker, startWorkerd } from '../support/workerd.js'

describeCaseTable('hono (workerd)', async () => {
  const server = await startWorkerd({ script: await bundleWorker('test/adapters/hono-workerd.worker.ts') })
  return httpTransport({ url: server.url, close: () => server.dispose() })
})
