/**
 * The case app as a Hono app running in workerd (bundled by test/support/workerd.ts): the same
 * `svc-webhooks/hono` middleware users mount on Node, Bun and Deno, default MemoryStore (one isolate).
 */
import { Hono } from 'hono'
import { webhooks } from 'svc-webhooks/hono'
import { createCaseApp, CASE_PATH, RUNS_PATH } from '../support/case-app.js'
import { drainRefused } from '../support/workerd-drain.js'

const caseApp = createCaseApp()
const app = new Hono()

// See drainRefused: workerd's dev server resets a connection whose request body was left unread.
app.use(CASE_PATH, async (c, next) => {
  await next()
  c.res = await drainRefused(c.req.raw, c.res)
})
app.all(CASE_PATH, webhooks(caseApp.options))
app.get(RUNS_PATH, (c) => c.body(caseApp.runsJson(), 200, { 'content-type': 'application/json' }))

export default app
