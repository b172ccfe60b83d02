/**
 * The handler side of the case table: framework-neutral and free of Node imports, so the same
 * code is bundled into Node servers, workerd, Next.js apps and the Bun and Deno runtimes.
 *
 * CASE_APP contract, implemented once per adapter/runtime around `createCaseApp()`:
 * - secret CASE_SECRET, maxBodyBytes CASE_MAX_BODY_BYTES, default tolerance, v1 not allowed,
 *   a fresh store per app (MemoryStore unless the runtime has its own, e.g. the Durable Object store).
 * - POST CASE_PATH (any other method too: answered 405 by the adapter): the adapter in receiver
 *   mode with one handler, for 'message.received':
 *     - records an attempt for delivery.id;
 *     - if event.message.text === 'slow': waits 300 ms before finishing;
 *     - if event.message.text === 'fail-once' and this is the first attempt for this id: throws;
 *     - otherwise records a successful run for delivery.id.
 * - POST TENANT_ROUTE (`/tenants/:tenant/webhooks`, many endpoints, one receiver): the adapter
 *   with `tenantOptions(tenantOf)`, `tenantOf` reading the tenant from the entry's own request the
 *   way that framework does (its route params, or the URL path where there is no router). The
 *   same handlers; `secret` is an async lookup of TENANT_SECRETS (globex holds a rotation list,
 *   an unknown tenant has none, BROKEN_TENANT's lookup rejects), `endpoint` is the tenant, and
 *   each processed delivery is recorded under its endpoint too.
 * - POST VARIANT_ROUTE (`/variants/:variant/webhooks`): the adapter with `variantOptions(variant)`,
 *   one receiver per variant (mounted on each variant's path, or picked by `variantFromPath`):
 *     - inbox: the inbox `createCaseApp({ inbox })` makes, a MemoryInbox (no worker: a delivery
 *       is accepted, the handler does not run);
 *     - broken-inbox: an inbox whose append throws; broken-store: a store whose claim throws;
 *     - pending-secret: a secret source holding CASE_SECRET that says a change is pending
 *       (re-read at most every 50 ms after a mismatch);
 *     - slow-body: `bodyTimeoutMs` CASE_BODY_TIMEOUT_MS (the row sends a body that stalls);
 *     - broken-telemetry: a telemetry whose `verified()` throws (its scopes still end and record);
 *     - parsed-body: the plain options, with the framework's own body parser mounted first
 *       (express.json(), a Koa parser, c.req.json() in Hono, a node listener reading the stream).
 * - Every route gets the app's `telemetry`, which records how each receive scope ended (its
 *   status), so every row also checks that each entry reports one scope per request.
 * - GET RUNS_PATH: `runsJson()`, i.e. { runs: { [id]: successfulRuns }, attempts: { [id]: attempts },
 *   endpoints: { [endpoint]: { [id]: successfulRuns } }, scopes: [status...] }. In-process
 *   transports read `record()` instead.
 */
import type {
  EndpointLookup,
  IdempotencyStore,
  SecretLookup,
  Secrets,
  SecretSource,
  TelemetryScope,
  WebhookHandlers,
  WebhookInboxProducer,
  WebhookResult,
  WebhookTelemetry,
} from 'svc-webhooks'
import {
  BROKEN_TENANT,
  CASE_BODY_TIMEOUT_MS,
  CASE_MAX_BODY_BYTES,
  CASE_SECRET,
  TENANT_SECRETS,
  VARIANTS,
  type CaseVariant,
} from './case-table-constants.js'

export {
  BROKEN_TENANT,
  CASE_BODY_TIMEOUT_MS,
  CASE_MAX_BODY_BYTES,
  CASE_PATH,
  CASE_SECRET,
  PENDING_SECRET,
  RUNS_PATH,
  TENANT_ROUTE,
  TENANT_SECRETS,
  tenantFromPath,
  tenantPath,
  VARIANT_ROUTE,
  variantFromPath,
  variantPath,
  VARIANTS,
  type CaseVariant,
} from './case-table-constants.js'

/** The handler's record: successful runs and attempts, by delivery id; on the tenant route also by endpoint. */
export interface RunsRecord {
  runs: Record<string, number>
  attempts: Record<string, number>
  /** Successful runs on the multi-tenant route, by endpoint (tenant) and delivery id. */
  endpoints: Record<string, Record<string, number>>
  /** The status each ended receive scope reported to `telemetry`, in order. */
  scopes: number[]
}

/** Receiver options of the multi-tenant route, for an entry whose request type is `R`. */
export interface TenantOptions<R> {
  secret: SecretLookup<R>
  endpoint: EndpointLookup<R>
  maxBodyBytes: number
  on: WebhookHandlers
  onResult: (result: WebhookResult) => void
  telemetry: WebhookTelemetry
}

export interface CaseAppOptions {
  /**
   * Makes the inbox variant's inbox: `() => new MemoryInbox()`, imported by the entry. This file
   * imports no value from the package, so every bundler (Next's server and Edge builds, workerd,
   * the runtime matrix) takes it as is, without resolving `svc-webhooks` from test/support.
   */
  inbox?: () => WebhookInboxProducer
}

/** Receiver options of a variant route (see the CASE_APP contract above). */
export interface VariantOptions {
  secret: string | SecretSource
  maxBodyBytes: number
  on: WebhookHandlers
  telemetry: WebhookTelemetry
  inbox?: WebhookInboxProducer
  store?: IdempotencyStore
  bodyTimeoutMs?: number
  secretRereadMs?: number
  pendingHoldMs?: number
}

/** Handlers that record their runs, and the JSON body the runs route answers with. */
export interface CaseApp {
  on: WebhookHandlers
  /** Receiver options for the case table (spread them into the adapter's options). */
  options: { secret: string; maxBodyBytes: number; on: WebhookHandlers; telemetry: WebhookTelemetry }
  /** The recording telemetry (for entries that build their own options). */
  telemetry: WebhookTelemetry
  /**
   * Receiver options for the multi-tenant route: `tenantOf` is how the entry reads the tenant
   * from its own request. `secrets` replaces TENANT_SECRETS (e.g. read from a Worker's `env`).
   */
  tenantOptions<R>(tenantOf: (request: R) => string | undefined, secrets?: Readonly<Record<string, Secrets>>): TenantOptions<R>
  /** Receiver options of one variant route; a fresh inbox on each call (`inbox` replaces the app's). */
  variantOptions(variant: CaseVariant, inbox?: () => WebhookInboxProducer): VariantOptions
  /** One handler per variant, `make` called with each variant's options (an adapter's factory). */
  variants<H>(make: (options: VariantOptions, variant: CaseVariant) => H): Record<CaseVariant, H>
  /** A copy of the record, for in-process transports. */
  record(): RunsRecord
  /** The record as the runs route's JSON body. */
  runsJson(): string
}

/**
 * @example
 * const app = createCaseApp({ inbox: () => new MemoryInbox() })
 * server.post(CASE_PATH, webhooks(app.options)); server.get(RUNS_PATH, (_, res) => res.type('json').send(app.runsJson()))
 * server.post(TENANT_ROUTE, webhooks(app.tenantOptions((req: Request) => req.params.tenant)))
 * for (const [name, hook] of Object.entries(app.variants((options) => webhooks(options)))) server.post(variantPath(name), hook)
 */
export function createCaseApp({ inbox: makeInbox }: CaseAppOptions = {}): CaseApp {
  const runs: Record<string, number> = {}
  const attempts: Record<string, number> = {}
  const endpoints: Record<string, Record<string, number>> = {}
  const scopes: number[] = []
  // Records what each entry reports; the mapping to OpenTelemetry is tested with the real SDK apart.
  const scope = (): TelemetryScope => ({
    verified: () => undefined,
    run: (fn) => fn(),
    traceparent: () => undefined,
    end: (result) => void scopes.push(result.status ?? 0),
  })
  const telemetry: WebhookTelemetry = { receive: scope, process: scope }
  const throwing: WebhookTelemetry = {
    receive: () => ({ ...scope(), verified: () => fail('a telemetry exporter that throws') }),
    process: scope,
  }
  const on: WebhookHandlers = {
    'message.received': async (event, delivery) => {
      attempts[delivery.id] = (attempts[delivery.id] ?? 0) + 1
      if (event.message.text === 'slow') await new Promise((resolve) => setTimeout(resolve, 300))
      if (event.message.text === 'fail-once' && attempts[delivery.id] === 1) throw new Error('case table: failing once on purpose')
      runs[delivery.id] = (runs[delivery.id] ?? 0) + 1
    },
  }
  // `onResult` is called before the answer is returned: the record is up to date when it arrives.
  const onResult = ({ outcome, endpoint, id }: WebhookResult) => {
    if (outcome !== 'processed' || endpoint === undefined || id === undefined) return
    const byId = (endpoints[endpoint] ??= {})
    byId[id] = (byId[id] ?? 0) + 1
  }
  const variantOptions = (variant: CaseVariant, inbox = makeInbox): VariantOptions => {
    const base = { secret: CASE_SECRET, maxBodyBytes: CASE_MAX_BODY_BYTES, on, telemetry }
    switch (variant) {
      case 'inbox':
        if (inbox === undefined) throw new TypeError('case app: the inbox variant needs createCaseApp({ inbox: () => new MemoryInbox() })')
        return { ...base, inbox: inbox() }
      case 'broken-inbox':
        return { ...base, inbox: { append: async () => fail('the inbox is unreachable') } }
      case 'broken-store':
        return { ...base, store: brokenStore }
      case 'pending-secret':
        // A mismatch waits for a fresh read of the source: spaced 50 ms here, not the default second.
        // A short hold: the row is about the 503 a pending mismatch ends in, not the 8 s it is held first.
        return { ...base, secret: pendingSource, secretRereadMs: 50, pendingHoldMs: 50 }
      case 'slow-body':
        return { ...base, bodyTimeoutMs: CASE_BODY_TIMEOUT_MS }
      case 'broken-telemetry':
        return { ...base, telemetry: throwing }
      case 'parsed-body':
        return base
    }
  }
  return {
    on,
    variantOptions,
    variants: <H>(make: (options: VariantOptions, variant: CaseVariant) => H) =>
      Object.fromEntries(VARIANTS.map((variant) => [variant, make(variantOptions(variant), variant)])) as Record<CaseVariant, H>,
    options: { secret: CASE_SECRET, maxBodyBytes: CASE_MAX_BODY_BYTES, on, telemetry },
    telemetry,
    tenantOptions: <R>(tenantOf: (request: R) => string | undefined, secrets = TENANT_SECRETS) => ({
      secret: async (request: R) => {
        const tenant = tenantOf(request)
        await Promise.resolve() // a lookup in a store: an await away
        if (tenant === BROKEN_TENANT) throw new Error(`case table: the secrets store of tenant "${tenant}" is unreachable`)
        return tenant !== undefined && Object.hasOwn(secrets, tenant) ? secrets[tenant] : undefined
      },
      endpoint: (request: R) => tenantOf(request) ?? '',
      maxBodyBytes: CASE_MAX_BODY_BYTES,
      on,
      onResult,
      telemetry,
    }),
    record: () => ({
      runs: { ...runs },
      attempts: { ...attempts },
      endpoints: Object.fromEntries(Object.entries(endpoints).map(([endpoint, byId]) => [endpoint, { ...byId }])),
      scopes: [...scopes],
    }),
    runsJson: () => JSON.stringify({ runs, attempts, endpoints, scopes }),
  }
}

function fail(what: string): never {
  throw new Error(`case table: ${what}, on purpose`)
}

/** A store whose claim fails (its server is down); release and complete are never reached. */
const brokenStore: IdempotencyStore = {
  claim: async () => fail('the idempotency store is unreachable'),
  complete: async () => true,
  release: async () => false,
}

/** An endpoint whose secret is being changed: CASE_SECRET held, a change pending for the next minute. */
const pendingSource: SecretSource = { read: () => ({ secrets: [CASE_SECRET], pendingUntil: Date.now() + 60_000 }) }
