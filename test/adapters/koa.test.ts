/**
 * svc-webhooks/koa on a real Koa 3 server on 127.0.0.1: the shared case table, and what only Koa
 * has: a body parser mounted first, and the app's own middleware around the webhook route.
 */
import Koa from 'koa'
import type { Context } from 'koa'
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest'
import { MemoryInbox } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/koa'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeCaseTable, httpTransport } from '../support/case-table.js'
import { CASE_PATH, CASE_SECRET, createCaseApp, RUNS_PATH, tenantFromPath, variantFromPath } from '../support/case-app.js'
import { listen, type RunningServer } from '../support/servers.js'

/**
 * A minimal body parser, as koa-bodyparser does: reads the stream and sets ctx.request.body.
 */
async function parseBody(ctx: Context, next: () => Promise<unknown>): Promise<void> {
  const chunks: Buffer[] = []
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer)
  ;(ctx.request as { body?: unknown }).body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  await next()
}

/**
 * The case app: Koa has no router, so the webhook routes are picked by `ctx.path`; the
 * parsed-body variant sits behind {@link parseBody}.
 */
function caseServer() {
  const cases = createCaseApp({ inbox: () => new MemoryInbox() })
  const hook = webhooks(cases.options)
  const tenants = webhooks(cases.tenantOptions((ctx: Context) => tenantFromPath(ctx.path)))
  const variants = cases.variants((options) => webhooks(options))
  const app = new Koa()
  app.use(async (ctx, next) => {
    if (ctx.path === CASE_PATH) return hook(ctx, next)
    if (tenantFromPath(ctx.path) !== undefined) return tenants(ctx, next)
    const variant = variantFromPath(ctx.path)
    if (variant === 'parsed-body') return parseBody(ctx, () => variants[variant](ctx, next))
    if (variant !== undefined) return variants[variant](ctx, next)
    if (ctx.path === RUNS_PATH) {
      ctx.type = 'json'
      ctx.body = cases.runsJson()
      return
    }
    return next()
  })
  return listen(app.callback())
}

describeCaseTable('koa 3', async () => httpTransport(await caseServer()))

describe('svc-webhooks/koa', () => {
  const servers: RunningServer[] = []
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()))
  })

  it('is Koa middleware with stats() for a health endpoint', async () => {
    const hook = webhooks({ secret: CASE_SECRET, on: {}, log: false })
    expectTypeOf(hook).toMatchTypeOf<Koa.Middleware>()
    expect(await hook.stats()).toEqual({ answers: {}, codes: {}, consecutiveFailures: 0 })
  })

  it('a body parser mounted first -> the JSON answer 500 body_already_parsed, the fix logged, handler not run; the app middleware around it still runs', async () => {
    const lines: string[] = []
    let runs = 0
    const app = new Koa()
    app.use(async (ctx, next) => {
      await next()
      ctx.set('x-app', 'seen')
    })
    app.use(parseBody)
    app.use(webhooks({ secret: CASE_SECRET, on: { 'message.received': () => void runs++ }, log: (line) => lines.push(line) }))
    const server = await listen(app.callback())
    servers.push(server)
    const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
    const res = await fetch(server.url + CASE_PATH, { method: 'POST', body: signed.body, headers: signed.headers })
    expect(res.status).toBe(500)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(res.headers.get('x-app')).toBe('seen')
    expect(await res.json()).toEqual({ ok: false, code: 'body_already_parsed' })
    expect(runs).toBe(0)
    expect(lines.join('\n')).toMatch(/body_already_parsed/)
  })
})
