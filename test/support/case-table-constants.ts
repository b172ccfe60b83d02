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
