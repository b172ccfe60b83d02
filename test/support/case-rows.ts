/**
 * The case table's rows, as data: each row is a signed delivery, the changes made to it on the way
 * (re-signed later, a header replaced, the body altered, another method), the answer each request
 * must get, named by its row in the core's answers table (`ANSWERS` from 'svc-webhooks'), and how
 * many times the handler ran. case-table.ts runs every row, unchanged, against every transport.
 *
 * The rows drive the case app (case-app.ts): the message text 'slow' makes the handler take
 * 300 ms, 'fail-once' makes it throw on its first attempt.
 */
import type { AnswerName } from 'svc-webhooks'
import { CASE_MAX_BODY_BYTES } from './case-table-constants.js'

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
  /** Sent with another method and no body. */
  method?: string
  /** Headers replacing the signed ones. */
  headers?: Readonly<Record<string, string>>
  /** `[from, to]`: the body sent differs from the body signed. */
  tamper?: readonly [string, string]
  /** Sent this many times at once, each copy signed afresh (as the sender's concurrent resends are). */
  copies?: number
  /** The answer, by name in `ANSWERS`. With `copies`: the answer exactly one copy gets. */
  answer: AnswerName
  /** With `copies`: the answers the other copies may get. */
  others?: readonly AnswerName[]
}

export interface CaseRow {
  name: string
  /** Absent for a request that carries no delivery. */
  delivery?: CaseDelivery
  /** Sent in order; each answer is checked before the next request goes out. */
  sends: readonly CaseSend[]
  /** Successful handler runs recorded for the delivery's id once the row is done. */
  runs?: number
}

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
  { name: 'a valid delivery after every row above', delivery: { text: 'still here' }, sends: [{ answer: 'processed' }], runs: 1 },
]
