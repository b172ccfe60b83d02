/**
 * The runtime matrix's app (scripts/test-runtimes.mjs): one Fetch handler, runtime-neutral, that
 * Node, Bun and Deno each serve with their own server (serve.mjs). It imports the built package
 * by name, as users do, and serves two case apps (test/support/case-app.ts, CASE_APP):
 *   /fetch/webhooks/svc, /fetch/runs  createFetchHandler from 'svc-webhooks/fetch'
 *   /fetch/tenants/:tenant/webhooks   the same, many endpoints on one receiver (tenant from the URL path)
 *   /hono/webhooks/svc,  /hono/runs   webhooks() from 'svc-webhooks/hono' in a Hono app
 *   /hono/tenants/:tenant/webhooks    the same, many endpoints on one receiver (tenant from c.req.param)
 *   /{fetch,hono}/variants/:variant/webhooks  each variant of the case app on its own receiver (the
 *                                     parsed-body one after request.json() / c.req.json())
 * plus POST /vectors (runs the posted known-answer vectors through verifyWebhook here, in this
 * runtime) and GET /info (runtime, version, and the crypto the `#crypto` import condition chose).
 */
import { hmacHex } from '#crypto'
import { Hono } from 'hono'
import { isWebhookVerificationError, MemoryInbox, verifyWebhook } from 'svc-webhooks'
import { createFetchHandler } from 'svc-webhooks/fetch'
import { webhooks } from 'svc-webhooks/hono'

// The WebCrypto build's HMAC is an async function, the node:crypto build's a plain one.
const cryptoName = hmacHex.constructor.name === 'AsyncFunction' ? 'WebCrypto' : 'node:crypto'

function runtime() {
  if (globalThis.Bun) return { runtime: 'bun', version: globalThis.Bun.version }
  if (globalThis.Deno) return { runtime: 'deno', version: globalThis.Deno.version.deno }
  return { runtime: 'node', version: globalThis.process.versions.node }
}

function fromBase64(text) {
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** Each vector through this runtime's verifyWebhook, with the vector's injected clock. */
async function runVectors(vectors) {
  const outcomes = []
  for (const vector of vectors) {
    const options = { secret: vector.secrets, allowV1: vector.allowV1, now: () => vector.now * 1000 }
    try {
      const delivery = await verifyWebhook({ body: fromBase64(vector.bodyBase64), headers: vector.headers }, options)
      outcomes.push({ name: vector.name, ok: true, signatureVersion: delivery.signatureVersion, secretIndex: delivery.secretIndex })
    } catch (error) {
      if (!isWebhookVerificationError(error)) throw error
      outcomes.push({ name: vector.name, ok: false, code: error.code })
    }
  }
  return outcomes
}

const json = (value, status = 200) => new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } })

/**
 * @param {typeof import('../support/case-app.ts')} caseApp the bundled case app module
 * @returns {(request: Request) => Promise<Response>}
 */
export function createRuntimeApp({ createCaseApp, tenantFromPath, variantFromPath, variantPath, TENANT_ROUTE, VARIANTS }) {
  const fetchCase = createCaseApp({ inbox: () => new MemoryInbox() })
  const fetchHandler = createFetchHandler(fetchCase.options)
  const fetchTenants = createFetchHandler(fetchCase.tenantOptions((request) => tenantFromPath(new URL(request.url).pathname)))
  const fetchVariants = fetchCase.variants((options) => createFetchHandler(options))

  const honoCase = createCaseApp({ inbox: () => new MemoryInbox() })
  const hono = new Hono()
  hono.all('/hono/webhooks/svc', webhooks(honoCase.options))
  hono.all(`/hono${TENANT_ROUTE}`, webhooks(honoCase.tenantOptions((c) => c.req.param('tenant'))))
  for (const variant of VARIANTS) {
    if (variant === 'parsed-body') hono.use(`/hono${variantPath(variant)}`, async (c, next) => void (await c.req.json(), await next()))
    hono.all(`/hono${variantPath(variant)}`, webhooks(honoCase.variantOptions(variant)))
  }
  hono.get('/hono/runs', (c) => c.body(honoCase.runsJson(), 200, { 'content-type': 'application/json' }))

  return async (request) => {
    const { pathname } = new URL(request.url)
    if (pathname === '/fetch/webhooks/svc') return fetchHandler(request)
    if (pathname.startsWith('/fetch/') && tenantFromPath(pathname) !== undefined) return fetchTenants(request)
    const variant = pathname.startsWith('/fetch/') ? variantFromPath(pathname) : undefined
    if (variant === 'parsed-body') await request.json()
    if (variant !== undefined) return fetchVariants[variant](request)
    if (pathname === '/fetch/runs') return json(fetchCase.record())
    if (pathname.startsWith('/hono/')) return hono.fetch(request)
    if (pathname === '/vectors' && request.method === 'POST') return json(await runVectors((await request.json()).vectors))
    if (pathname === '/info') return json({ ...runtime(), crypto: cryptoName })
    return json({ ok: false, code: 'not_found' }, 404)
  }
}
