/**
 * The case app as a Cloudflare Worker (bundled by test/support/workerd.ts, run in workerd): the
 * `svc-webhooks/cloudflare` wrapper with the Durable Object store, on CASE_PATH and on the
 * multi-tenant route (the tenant from the URL path, each tenant's secrets from the TENANT_SECRETS
 * binding through `withWebhooks((env) => options)`), on each variant route (picked by
 * `variantFromPath`; the parsed-body one after `request.json()`, the broken-store one with its
 * own store, the others with the Durable Object store), plus probes for the tests in
 * cloudflare.test.ts (a Worker whose secret binding is missing, direct store calls).
 */
import { MemoryInbox } from 'svc-webhooks'
import { DurableObjectStore, withWebhooks, type DurableObjectNamespaceLike } from 'svc-webhooks/cloudflare'
import { createCaseApp, CASE_PATH, RUNS_PATH, tenantFromPath, variantFromPath } from '../support/case-app.js'
import { drainRefused } from '../support/workerd-drain.js'

export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'

interface Env {
  SVC_WEBHOOK_SECRET: string
  /** JSON: each tenant's secret, or its list of secrets during a rotation. */
  TENANT_SECRETS: string
  WEBHOOK_IDEMPOTENCY: DurableObjectNamespaceLike
}

const app = createCaseApp({ inbox: () => new MemoryInbox() })
let optionsCalls = 0

const caseWorker = withWebhooks((env: Env) => {
  optionsCalls++
  return { on: app.on, maxBodyBytes: app.options.maxBodyBytes, telemetry: app.telemetry, store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY) }
})
// Many endpoints, one receiver: the secrets come from `env`, the tenant from the URL path (a Worker has no router).
const tenantWorker = withWebhooks((env: Env) => ({
  ...app.tenantOptions((request: Request) => tenantFromPath(new URL(request.url).pathname), JSON.parse(env.TENANT_SECRETS) as Record<string, string | string[]>),
  store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
}))
const variants = app.variants((options, variant) =>
  withWebhooks((env: Env) => (variant === 'broken-store' ? options : { ...options, store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY) })),
)
const missingSecret = withWebhooks({ secretBinding: 'MISSING_SECRET_BINDING', on: app.on })
const rotated = withWebhooks({ secretBinding: ['OLD_SECRETS', 'SVC_WEBHOOK_SECRET'], on: {} })

type StoreCall = { op: 'claim' | 'complete' | 'release'; key: string; owner: string; ms: number; prefix?: string }

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url)
    if (pathname === CASE_PATH) return drainRefused(request, await caseWorker.fetch(request, env))
    if (tenantFromPath(pathname) !== undefined) return drainRefused(request, await tenantWorker.fetch(request, env))
    const variant = variantFromPath(pathname)
    if (variant === 'parsed-body') await request.json()
    if (variant !== undefined) return drainRefused(request, await variants[variant].fetch(request, env))
    if (pathname === RUNS_PATH) return new Response(app.runsJson(), { headers: { 'content-type': 'application/json' } })
    if (pathname === '/missing-secret') return missingSecret.fetch(request, env)
    if (pathname === '/rotated') return rotated.fetch(request, env)
    if (pathname === '/stats') return Response.json({ optionsCalls })
    if (pathname === '/store') {
      const { op, key, owner, ms, prefix } = (await request.json()) as StoreCall
      const store = new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY, { prefix })
      const result = op === 'release' ? await store.release(key, owner) : await store[op](key, owner, ms)
      return Response.json({ result })
    }
    return new Response('not found', { status: 404 })
  },
}
