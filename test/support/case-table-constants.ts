/** Constants shared by the case table and the case apps (no test-runner imports: bundled into runtimes). */
export const CASE_SECRET = 'svc_whsec_Y2FzZS10YWJsZS1zZWNyZXQtZm9yLXRlc3Rz'
export const CASE_MAX_BODY_BYTES = 64 * 1024
export const CASE_PATH = '/webhooks/svc'
export const RUNS_PATH = '/runs'

/**
 * The multi-tenant route (many endpoints, one receiver), in each framework's own route syntax:
 * `/tenants/:tenant/webhooks` (Express, Fastify, Hono), `/tenants/{tenant}/webhooks` (API Gateway).
 * Entries without a router (node, Fetch, Next, Workers, function URLs) read the tenant from the path.
 */
export const TENANT_ROUTE = '/tenants/:tenant/webhooks'

/** Each tenant's secrets: acme has one, globex two (a rotation: the new one first). */
export const TENANT_SECRETS: Readonly<Record<string, string | readonly string[]>> = {
  acme: 'svc_whsec_YWNtZS10ZW5hbnQtc2VjcmV0LWNhc2UtdGFibGU',
  globex: ['svc_whsec_Z2xvYmV4LW5ldy1zZWNyZXQtY2FzZS10YWJsZQ', 'svc_whsec_Z2xvYmV4LW9sZC1zZWNyZXQtY2FzZS10YWJsZQ'],
}

/** The tenant whose secret lookup throws (its secrets store is down): answered 503 secret_lookup_failed. */
export const BROKEN_TENANT = 'broken'

/** The path of `tenant`'s webhook route. */
export const tenantPath = (tenant: string): string => `/tenants/${encodeURIComponent(tenant)}/webhooks`

/** The tenant a path (optionally with a query) names, for entries without a router; undefined for any other path. */
export function tenantFromPath(path: string | undefined): string | undefined {
  const match = /\/tenants\/([^/?]+)\/webhooks(?:\?|$)/.exec(path ?? '')
  return match ? decodeURIComponent(match[1]!) : undefined
}

/**
 * The variant routes: the same handlers behind receivers configured otherwise, one route each,
 * `/variants/:variant/webhooks` (see `variantOptions` in case-app.ts for what each one is).
 * `parsed-body` is the plain case app with the framework's own body parser mounted in front.
 */
export const VARIANTS = ['inbox', 'broken-inbox', 'broken-store', 'pending-secret', 'slow-body', 'broken-telemetry', 'parsed-body'] as const

/** The name of a variant route. */
export type CaseVariant = (typeof VARIANTS)[number]

/** The variant route, in the route syntax of Express, Fastify and Hono. */
export const VARIANT_ROUTE = '/variants/:variant/webhooks'

/** The path of `variant`'s webhook route. */
export const variantPath = (variant: CaseVariant): string => `/variants/${variant}/webhooks`

/** The variant a path (optionally with a query) names, for entries without a router; undefined for any other path. */
export function variantFromPath(path: string | undefined): CaseVariant | undefined {
  const match = /\/variants\/([^/?]+)\/webhooks(?:\?|$)/.exec(path ?? '')
  return match && (VARIANTS as readonly string[]).includes(match[1]!) ? (match[1] as CaseVariant) : undefined
}

/** The slow-body variant's `bodyTimeoutMs`: a body still arriving after it is answered 503 body_timeout. */
export const CASE_BODY_TIMEOUT_MS = 250

/** A secret the sender may switch to while the pending-secret variant's source says a change is in progress. */
export const PENDING_SECRET = 'svc_whsec_bmV4dC1zZWNyZXQtbm90LXlldC1yZWFk'
