/**
 * The case table's rows, as data: each row is a signed delivery, the changes made to it on the way
 * (re-signed later or with another secret, a header replaced, the body altered, another method,
 * sent to a tenant's route), the answer each request must get, named by its row in the core's
 * answers table (`ANSWERS` from 'svc-webhooks'), and how many times the handler ran.
 * case-table.ts runs every row, unchanged, against every transport.
 *
 * The rows drive the case app (case-app.ts): the message text 'slow' makes the handler take
 * 300 ms, 'fail-once' makes it throw on its first attempt; a send with `tenant` goes to the
 * multi-tenant route (TENANT_ROUTE) of that tenant, one with `variant` to that variant's route
 * (VARIANT_ROUTE). A row that `needs` what a transport lacks is reported as not applying there.
 */
import type { AnswerName } from 'svc-webhooks'
import { BROKEN_TENANT, CASE_MAX_BODY_BYTES, PENDING_SECRET, TENANT_SECRETS, type CaseVariant } from './case-table-constants.js'

/** The delivery a row starts from: signed with CASE_SECRET, now, v2 and v1, unless it says otherwise. */
export interface CaseDelivery {
  /** A `message.received` sample event with this message text. */
  text?: string
  /** Another event object (serialized like the service does). */
  event?: object
  /** The exact body, instead of an event. */
  body?: string
  /** Signed with this secret instead of the case app's. */
  secret?: string
  /** Signature headers sent. @default ['v2', 'v1'] */
  schemes?: readonly ('v2' | 'v1')[]
  /** Signed this many seconds ago. @default 0 */
  ageSeconds?: number
}

/** One request of a row: the row's delivery, changed as described, and the answer it must get. */
export interface CaseSend {
  /** Re-signed with the same id and body this many seconds after the first send: a retry or a resend. */
  later?: number
  /** Sent to this tenant's route of the multi-tenant receiver (TENANT_ROUTE) instead of CASE_PATH. */
  tenant?: string
  /** Sent to this variant route of the case app (VARIANT_ROUTE) instead of CASE_PATH. */
  variant?: CaseVariant
  /** Only the first half of the body is sent, then the body stalls (never ends). */
  stall?: true
  /** Re-signed with the same id and body with this secret (another tenant's delivery under the same id). */
  secret?: string
  /** Sent with another method and no body. */
  method?: string
  /** Headers replacing the signed ones. */
  headers?: Readonly<Record<string, string>>
  /** Signed headers left out of the request. */
  omit?: readonly string[]
  /** `[from, to]`: the body sent differs from the body signed. */
  tamper?: readonly [string, string]
  /** Sent this many times at once, each copy signed afresh (as the sender's concurrent resends are). */
  copies?: number
  /** The answer, by name in `ANSWERS`. With `copies`: the answer exactly one copy gets. */
  answer: AnswerName
  /** With `copies`: the answers the other copies may get. */
  others?: readonly AnswerName[]
}

/**
 * What a row needs of the way its requests are carried, beyond a request and its answer. A
 * transport that cannot do it says why (`CaseTransport.lacks`), and the row is reported as not
 * applying there, with that reason, instead of being run.
 * - `stalled-body`: a body that stops arriving before its end (a real socket or a stream); not
 *   where the platform buffers the whole body before the code runs (Lambda, Next's Edge runtime).
 * - `parsed-body`: the framework's own body parser mounted in front of the `parsed-body` route.
 */
export type CaseCapability = 'stalled-body' | 'parsed-body'

export interface CaseRow {
  name: string
  /** What the row needs of its transport (see {@link CaseCapability}). */
  needs?: readonly CaseCapability[]
  /** Absent for a request that carries no delivery. */
  delivery?: CaseDelivery
  /** Sent in order; each answer is checked before the next request goes out. */
  sends: readonly CaseSend[]
  /** Successful handler runs recorded for the delivery's id once the row is done. */
  runs?: number
  /** On the multi-tenant route: successful runs for the delivery's id, by tenant (the dedupe namespace). */
  tenantRuns?: Readonly<Record<string, number>>
}

const ACME = TENANT_SECRETS.acme as string
const [GLOBEX_NEW, GLOBEX_OLD] = TENANT_SECRETS.globex as readonly [string, string]

/**
 * Many endpoints, one receiver (DESIGN.md): two tenants on one route, each verified with its own
 * secrets only, dedupe namespaced by tenant, no secret 404, a failed lookup 503 with Retry-After.
 */
export const TENANT_ROWS: readonly CaseRow[] = [
  {
    name: "tenant acme, signed with acme's secret",
    delivery: { text: 'for acme', secret: ACME },
    sends: [{ tenant: 'acme', answer: 'processed' }],
    runs: 1,
    tenantRuns: { acme: 1 },
  },
  {
    name: "tenant globex, signed with its new and then its old secret (rotation list)",
    delivery: { text: 'for globex', secret: GLOBEX_NEW },
    sends: [{ tenant: 'globex', answer: 'processed' }, { tenant: 'globex', secret: GLOBEX_OLD, later: 1, answer: 'duplicate' }],
    runs: 1,
    tenantRuns: { globex: 1 },
  },
  {
    name: "tenant globex, signed with its old secret only",
    delivery: { text: 'old globex secret', secret: GLOBEX_OLD },
    sends: [{ tenant: 'globex', answer: 'processed' }],
    runs: 1,
    tenantRuns: { globex: 1 },
  },
  {
    name: "tenant acme, signed with globex's secret",
    delivery: { text: 'crossed', secret: GLOBEX_NEW },
    sends: [{ tenant: 'acme', answer: 'invalid_signature' }],
    runs: 0,
  },
  {
    name: "tenant globex, signed with acme's secret",
    delivery: { text: 'crossed', secret: ACME },
    sends: [{ tenant: 'globex', answer: 'invalid_signature' }],
    runs: 0,
  },
  {
    name: 'the same delivery id under acme and globex: once for each, a duplicate within one',
    delivery: { text: 'same id, two tenants', secret: ACME },
    sends: [
      { tenant: 'acme', answer: 'processed' },
      { tenant: 'globex', secret: GLOBEX_NEW, answer: 'processed' },
      { tenant: 'acme', later: 1, answer: 'duplicate' },
      { tenant: 'globex', secret: GLOBEX_OLD, later: 2, answer: 'duplicate' },
    ],
    runs: 2,
    tenantRuns: { acme: 1, globex: 1 },
  },
  { name: 'GET on a tenant route', sends: [{ tenant: 'acme', method: 'GET', answer: 'method_not_allowed' }] },
  {
    name: 'tenant with no secret (unknown endpoint)',
    delivery: { text: 'nobody here', secret: ACME },
    sends: [{ tenant: 'initech', answer: 'unknown_endpoint' }],
    runs: 0,
  },
  {
    name: 'tenant whose secret lookup throws',
    delivery: { text: 'store down', secret: ACME },
    sends: [{ tenant: BROKEN_TENANT, answer: 'secret_lookup_failed' }],
    runs: 0,
  },
  {
    name: 'tenant acme after the failed lookup and the refusals',
    delivery: { text: 'acme still served', secret: ACME },
    sends: [{ tenant: 'acme', answer: 'processed' }],
    runs: 1,
    tenantRuns: { acme: 1 },
  },
]

/**
 * The receiver's other configurations (VARIANT_ROUTE): an inbox, an inbox and a store that are
 * down, a secret change in progress, a body read deadline, a telemetry that throws, a body
 * parser in front. Every answer of the core's table not reached by the plain routes is here.
 */
export const VARIANT_ROWS: readonly CaseRow[] = [
  {
    name: 'inbox: a valid delivery is appended, its resend is a duplicate',
    delivery: { text: 'to the inbox' },
    sends: [{ variant: 'inbox', answer: 'accepted' }, { variant: 'inbox', later: 1, answer: 'duplicate' }],
    runs: 0,
  },
  { name: 'inbox whose append throws', delivery: { text: 'inbox down' }, sends: [{ variant: 'broken-inbox', answer: 'inbox_unavailable' }], runs: 0 },
  { name: 'store whose claim throws', delivery: { text: 'store down' }, sends: [{ variant: 'broken-store', answer: 'store_unavailable' }], runs: 0 },
  {
    name: 'secret change pending, signed with the secret held',
    delivery: { text: 'held secret' },
    sends: [{ variant: 'pending-secret', answer: 'processed' }],
    runs: 1,
  },
  {
    name: 'secret change pending, signed with a secret not held yet',
    delivery: { text: 'next secret', secret: PENDING_SECRET },
    sends: [{ variant: 'pending-secret', answer: 'secret_pending' }],
    runs: 0,
  },
  {
    name: 'body that stalls past bodyTimeoutMs',
    needs: ['stalled-body'],
    delivery: { text: 'stalled' },
    sends: [{ variant: 'slow-body', stall: true, answer: 'body_timeout' }],
    runs: 0,
  },
  {
    name: 'body read by the framework\'s parser first',
    needs: ['parsed-body'],
    delivery: { text: 'parsed' },
    sends: [{ variant: 'parsed-body', answer: 'body_already_parsed' }],
    runs: 0,
  },
  {
    name: 'an unexpected error in the receiver (a telemetry that throws)',
    delivery: { text: 'telemetry down' },
    sends: [{ variant: 'broken-telemetry', answer: 'internal_error' }],
    runs: 0,
  },
]

/**
 * Every row, in the order they run. The last one checks that the target still serves after all
 * the refusals before it.
 *
 * @example
 * for (const row of CASE_ROWS) it(row.name, () => runRow(transport, row))
 */
export const CASE_ROWS: readonly CaseRow[] = [
  { name: 'valid delivery', delivery: { text: 'hello' }, sends: [{ answer: 'processed' }], runs: 1 },
  {
    name: 'resend of a processed id',
    delivery: { text: 'resend me' },
    sends: [{ answer: 'processed' }, { later: 1, answer: 'duplicate' }],
    runs: 1,
  },
  {
    // Never 409 (a permanent refusal to the sender) while the first copy is still running.
    name: '10 concurrent copies of a slow delivery',
    delivery: { text: 'slow' },
    sends: [{ copies: 10, answer: 'processed', others: ['in_flight', 'duplicate'] }],
    runs: 1,
  },
  {
    name: 'handler throws once, the retry runs it',
    delivery: { text: 'fail-once' },
    sends: [{ answer: 'handler_failed' }, { later: 5, answer: 'processed' }],
    runs: 1,
  },
  { name: 'event type with no handler', delivery: { event: { event: 'template.approved', id: 'x' } }, sends: [{ answer: 'ignored' }], runs: 0 },
  { name: 'v1-only delivery', delivery: { text: 'v1', schemes: ['v1'] }, sends: [{ answer: 'v1_not_allowed' }], runs: 0 },
  { name: 'tampered body', delivery: { text: 'pay 10' }, sends: [{ tamper: ['pay 10', 'pay 99'], answer: 'invalid_signature' }], runs: 0 },
  { name: 'wrong secret', delivery: { text: 'hi', secret: 'svc_whsec_not-the-right-one' }, sends: [{ answer: 'invalid_signature' }], runs: 0 },
  { name: 'stale timestamp', delivery: { text: 'old', ageSeconds: 3600 }, sends: [{ answer: 'timestamp_too_old' }], runs: 0 },
  { name: 'timestamp an hour ahead', delivery: { text: 'early', ageSeconds: -3600 }, sends: [{ answer: 'timestamp_in_future' }], runs: 0 },
  { name: 'no delivery id', delivery: { text: 'noid' }, sends: [{ omit: ['svc-webhook-id'], answer: 'missing_id' }], runs: 0 },
  { name: 'delivery id with a space', delivery: { text: 'badid' }, sends: [{ headers: { 'svc-webhook-id': 'two words' }, answer: 'invalid_id' }], runs: 0 },
  { name: 'no timestamp', delivery: { text: 'nots' }, sends: [{ omit: ['svc-webhook-timestamp'], answer: 'missing_timestamp' }], runs: 0 },
  {
    name: 'malformed timestamp',
    delivery: { text: 'ts' },
    sends: [{ headers: { 'svc-webhook-timestamp': '17e9' }, answer: 'invalid_timestamp' }],
    runs: 0,
  },
  { name: 'missing signature', delivery: { text: 'nosig', schemes: [] }, sends: [{ answer: 'missing_signature' }], runs: 0 },
  { name: 'oversize body', delivery: { text: 'x'.repeat(CASE_MAX_BODY_BYTES + 1) }, sends: [{ answer: 'body_too_large' }], runs: 0 },
  { name: 'signed body that is not JSON', delivery: { body: 'not json at all' }, sends: [{ answer: 'invalid_json' }], runs: 0 },
  { name: 'GET', sends: [{ method: 'GET', answer: 'method_not_allowed' }] },
  ...TENANT_ROWS,
  ...VARIANT_ROWS,
  { name: 'a valid delivery after every row above', delivery: { text: 'still here' }, sends: [{ answer: 'processed' }], runs: 1 },
]
