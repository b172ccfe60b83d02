/**
 * The case table in process against the core itself: `createWebhookReceiver(...).handle()` with
 * the body already held as bytes. Every adapter suite runs the same rows in its own runtime; a row
 * failing here as well is the core's to fix, not an adapter's.
 */
import { createWebhookReceiver } from 'svc-webhooks'
import { createCaseApp } from '../support/case-app.js'
import { describeCaseTable, receiverTransport } from '../support/case-table.js'

describeCaseTable('core: createWebhookReceiver().handle(), in process', async () => {
  const app = createCaseApp()
  return receiverTransport(createWebhookReceiver(app.options), app)
})
