/**
 * The case table in process against the core itself: `createWebhookReceiver(...).handle()` with
 * the body already held as bytes, and for the tenant rows a multi-tenant receiver given the
 * caller's own request type through `receive(request, transport)` (the tenant read from its
 * path). Every adapter suite runs the same rows in its own runtime; a row failing here as well is
 * the core's to fix, not an adapter's.
 */
import { createWebhookReceiver } from 'svc-webhooks'
import { createCaseApp } from '../support/case-app.js'
import { describeCaseTable, receiverTransport, tenantFromPath, type PathRequest } from '../support/case-table.js'

describeCaseTable('core: createWebhookReceiver().handle() and .receive(), in process', async () => {
  const app = createCaseApp()
  const tenants = createWebhookReceiver(app.tenantOptions((request: PathRequest) => tenantFromPath(request.path)))
  return receiverTransport(createWebhookReceiver(app.options), app, tenants)
})
