/**
 * The case app as a Hono app running in workerd (bundled by test/support/workerd.ts): the same
 * `svc-webhooks/hono` middleware users mount on Node, Bun and Deno, default MemoryStore (one
 * isolate), on CASE_PATH, on the multi-tenant TENANT_ROUTE and on each variant route (the
 * parsed-body one behind a middleware that reads c.req.json() first).
 */
import { Hono, type Context } from 'hono'
import { MemoryInbox } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/hono'
import { createCaseApp, CASE_PATH, RUNS_PATH, TENANT_ROUTE, variantPath, VARIANTS } from '../support/case-app.js'
import { drainRefused } from '../support/workerd-drain.js'

const caseApp = createCaseApp({ inbox: () => new MemoryInbox() })
const app = new Hono()

// See drainRefused: workerd's dev server resets a connection whose request body was left unread.
for (const path of [CASE_PATH, TENANT_ROUTE, ...VARIANTS.map(variantPath)]) {
  app.use(path, async (c, next) => {
    await next()
    c.res = await drainRefused(c.req.raw, c.res)
  })
}
app.all(CASE_PATH, webhooks(caseApp.options))
// Many endpoints, one receiver: the tenant from Hono's own route params.
app.all(TENANT_ROUTE, webhooks(caseApp.tenantOptions((c: Context) => c.req.param('tenant'))))
for (const variant of VARIANTS) {
  if (variant === 'parsed-body') app.use(variantPath(variant), async (c, next) => void (await c.req.json(), await next()))
  app.all(variantPath(variant), webhooks(caseApp.variantOptions(variant)))
}
app.get(RUNS_PATH, (c) => c.body(caseApp.runsJson(), 200, { 'content-type': 'application/json' }))

export default app
