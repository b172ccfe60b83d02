/**
 * The case table's targets, as transports: `send(request) -> response` to a case app's webhook
 * route (or to a tenant's route of its multi-tenant receiver), and `record()` for the case app's
 * record of handler runs. Over real HTTP (fetch to 127.0.0.1), in process (a Fetch handler or a
 * receiver called directly, the record read from the case app itself), or through the events
 * Lambda hands a function. A transport only carries the request to its path; the app behind it
 * routes it, as it would in production. A stalled request's body is a stream that sends its
 * bytes and then never ends, over a real socket or in process.
 */
import { createWebhookReceiver, MemoryInbox, readRequestBody, type WebhookReceiver, type WebhookTransport } from 'svc-webhooks'
import type { LambdaWebhookEvent, LambdaWebhookResult } from 'svc-webhooks/lambda'
import type { CaseApp, RunsRecord } from './case-app.js'
import { CASE_PATH, RUNS_PATH, TENANT_ROUTE, tenantPath, VARIANT_ROUTE, variantPath, VARIANTS, type CaseVariant } from './case-table-constants.js'
import { eventOf, type LambdaSource } from './lambda-events.js'

export type { RunsRecord }

/** A request to the case app's webhook route, or to `tenant`'s route of the multi-tenant receiver. */
export interface CaseRequest {
  method: string
  headers: Readonly<Record<string, string>>
  /** Null for a request without a body. */
  body: Uint8Array | null
  /** Sent to this tenant's route (TENANT_ROUTE) instead of CASE_PATH. */
  tenant?: string
  /** Sent to this variant route (VARIANT_ROUTE) instead of CASE_PATH. */
  variant?: CaseVariant
  /** `body` is only what arrives before the body stalls: it never ends. */
  stall?: true
}

/** The path a request goes to. */
function pathOf(request: CaseRequest, path = CASE_PATH, tenantRoute: (tenant: string) => string = tenantPath, variantRoute = variantPath): string {
  if (request.tenant !== undefined) return tenantRoute(request.tenant)
  return request.variant === undefined ? path : variantRoute(request.variant)
}

/** The body `fetch` or a `Request` sends: a stalled one as a stream that sends its bytes and never ends. */
function bodyOf(request: CaseRequest): BodyInit | null {
  if (!request.stall) return request.body as BodyInit | null
  const head = request.body
  return new ReadableStream<Uint8Array>({ start: (controller) => void (head && controller.enqueue(head)) })
}

/** `fetch` and `Request` take a stream body only with `duplex: 'half'` (not yet in lib.dom's RequestInit). */
function init(request: CaseRequest): RequestInit {
  const { method, headers } = request
  return { method, headers, body: bodyOf(request), ...(request.stall ? { duplex: 'half' } : {}) } as RequestInit
}

/** The answer as the sender sees it. */
export interface CaseResponse {
  status: number
  /** Header names lowercased. */
  headers: Readonly<Record<string, string>>
  body: string
}

export interface CaseTransport {
  send(request: CaseRequest): Promise<CaseResponse>
  /** The case app's record of handler runs and attempts. */
  record(): Promise<RunsRecord>
  /** Stops what the transport started (a server); called once its table is done. */
  close?(): Promise<void>
}

/** A case app served over HTTP, e.g. by `listen()` from servers.ts. */
export interface HttpTarget {
  /** Base URL, e.g. http://127.0.0.1:43123 */
  url: string
  /** Path of the webhook route. @default CASE_PATH */
  path?: string
  /** Path of the runs record. @default RUNS_PATH */
  runsPath?: string
  /** Path of a tenant's route of the multi-tenant receiver. @default tenantPath */
  tenantPath?: (tenant: string) => string
  /** Path of a variant route. @default variantPath */
  variantPath?: (variant: CaseVariant) => string
  close?: () => Promise<void>
}

/**
 * Real HTTP: fetch to the target's URL.
 *
 * @example
 * describeCaseTable('express 5', async () => httpTransport(await listen(app)))
 */
export function httpTransport(target: HttpTarget): CaseTransport {
  if (!/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(target.url)) throw new Error(`not a local base URL: ${target.url}`)
  return {
    async send(request) {
      const res = await fetch(target.url + pathOf(request, target.path, target.tenantPath, target.variantPath), init(request))
      return { status: res.status, headers: headersOf(res), body: await res.text() }
    },
    async record() {
      const res = await fetch(target.url + (target.runsPath ?? RUNS_PATH))
      if (!res.ok) throw new Error(`${target.runsPath ?? RUNS_PATH} answered ${res.status}: ${await res.text()}`)
      return (await res.json()) as RunsRecord
    },
    ...(target.close ? { close: target.close } : {}),
  }
}

/**
 * In process: a Fetch handler (the app, routing by URL path) called with a `Request`, no server between.
 *
 * @example
 * describeCaseTable('fetch, in process', async () => { const app = createCaseApp(); return fetchTransport(createFetchHandler(app.options), app) })
 */
export function fetchTransport(handler: (request: Request) => Response | Promise<Response>, app: CaseApp): CaseTransport {
  return {
    async send(request) {
      const res = await handler(new Request(`http://127.0.0.1${pathOf(request)}`, init(request)))
      return { status: res.status, headers: headersOf(res), body: await res.text() }
    },
    record: async () => app.record(),
  }
}

/**
 * A request as a caller of the core's `receive()` holds it: its own type (here the path, the
 * method, the headers and the bytes), read through its own {@link WebhookTransport}.
 */
export interface PathRequest {
  method: string
  path: string
  headers: Readonly<Record<string, string>>
  body: Uint8Array
}

/** The core's view of a {@link PathRequest}: the declared length is the bytes held, so an oversize body is refused before it is read. */
export const pathRequestTransport: WebhookTransport<PathRequest> = {
  method: (request) => request.method,
  header: (request, name) =>
    name === 'content-length' ? String(request.body.byteLength) : Object.entries(request.headers).find(([key]) => key.toLowerCase() === name)?.[1],
  body: (request) => request.body,
}

/** A `Request` as a caller of `receive()` reads it, with the core's own deadline-bound body reader. */
const requestTransport: WebhookTransport<Request> = {
  method: (request) => request.method,
  header: (request, name) => request.headers.get(name) ?? undefined,
  body: (request, maxBodyBytes, timeoutMs) => readRequestBody(request, maxBodyBytes, timeoutMs),
}

/**
 * In process: the core's `receiver.handle()`, with the body already held as bytes; tenant rows go
 * to `tenants`, a receiver whose `secret` and `endpoint` read the path of a {@link PathRequest}
 * given to `receive()` (a handled request has no path). Variant rows go to a receiver per variant,
 * built here from the case app's `variantOptions` (the inbox variant with a MemoryInbox): the `parsed-body` one is handed the parsed JSON
 * (what a framework's parser leaves), a stalled body goes through `receive()` with a `Request`
 * read by the core's `readRequestBody`.
 *
 * @example
 * const app = createCaseApp()
 * const tenants = createWebhookReceiver(app.tenantOptions((request: PathRequest) => tenantFromPath(request.path)))
 * describeCaseTable('core', async () => receiverTransport(createWebhookReceiver(app.options), app, tenants))
 */
export function receiverTransport(
  receiver: Pick<WebhookReceiver, 'handle'>,
  app: CaseApp,
  tenants?: Pick<WebhookReceiver<PathRequest>, 'receive'>,
): CaseTransport {
  const inbox = () => new MemoryInbox()
  const variants = Object.fromEntries(VARIANTS.map((variant) => [variant, createWebhookReceiver(app.variantOptions(variant, inbox))]))
  return {
    async send(request) {
      const { method, headers, body } = request
      const held = { method, headers: { ...headers }, body: body ?? new Uint8Array(0) }
      let answer
      if (request.variant !== undefined) {
        const variant = variants[request.variant]!
        if (request.stall) answer = await variant.receive(new Request(`http://127.0.0.1${pathOf(request)}`, init(request)), requestTransport)
        else if (request.variant === 'parsed-body') answer = await variant.handle({ ...held, body: JSON.parse(new TextDecoder().decode(held.body)) })
        else answer = await variant.handle(held)
      } else if (request.tenant === undefined) answer = await receiver.handle(held)
      else if (tenants) answer = await tenants.receive({ ...held, path: pathOf(request) }, pathRequestTransport)
      else throw new Error('receiverTransport: a tenant row needs the `tenants` receiver')
      return { status: answer.status, headers: lowercased(answer.headers), body: answer.body }
    },
    record: async () => app.record(),
  }
}

/** The tenant and variant routes as API Gateway declares them: `/tenants/{tenant}/webhooks`. */
const API_GATEWAY_TENANT_ROUTE = TENANT_ROUTE.replace(/:(\w+)/g, '{$1}')
const API_GATEWAY_VARIANT_ROUTE = VARIANT_ROUTE.replace(/:(\w+)/g, '{$1}')

/**
 * Through Lambda: each request becomes the event `source` hands the function (the body
 * base64-encoded when `base64`), for the path it was sent to: a tenant's request arrives on the
 * API Gateway route TENANT_ROUTE with its `pathParameters` (REST and HTTP APIs; a function URL
 * has no routes, only `rawPath`), a variant's on VARIANT_ROUTE the same way. Lambda hands the
 * function the whole body, so a stalled body never reaches it (declare `stalled-body` lacking).
 * The proxy result becomes the response.
 *
 * @example
 * describeCaseTable('lambda: HTTP API', async () => { const app = createCaseApp(); return lambdaTransport(webhooks(app.options), app, { source: 'http-api-v2' }) })
 */
export function lambdaTransport(
  handler: (event: LambdaWebhookEvent) => Promise<LambdaWebhookResult>,
  app: CaseApp,
  { source, base64 = false }: { source: LambdaSource; base64?: boolean },
): CaseTransport {
  return {
    async send(request) {
      const { method, headers, body, tenant, variant } = request
      if (request.stall) throw new Error('lambdaTransport: Lambda hands the function the whole body; a stalled body never reaches it')
      const route: { resource: string; pathParameters: Record<string, string> } | undefined =
        tenant !== undefined
          ? { resource: API_GATEWAY_TENANT_ROUTE, pathParameters: { tenant } }
          : variant !== undefined
            ? { resource: API_GATEWAY_VARIANT_ROUTE, pathParameters: { variant } }
            : undefined
      const result = await handler(eventOf(source, { method, headers, body, base64, path: pathOf(request), ...(route ? { route } : {}) }))
      return { status: result.statusCode, headers: lowercased(result.headers), body: result.body }
    },
    record: async () => app.record(),
  }
}

function headersOf(response: Response): Record<string, string> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => (headers[name] = value))
  return headers
}

function lowercased(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]))
}
