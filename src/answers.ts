/**
 * The answers table as data (DESIGN.md "Answers, idempotency, and the sender's retry rules"):
 * every way a delivery can end, with the status, JSON body and headers it is answered with. The
 * sender retries 5xx and 429 and drops every other 4xx (spec/service-api.md §6.3), so each row is
 * a promise about data. The receiver picks a row by name; `doctor` and the tests read the same rows.
 */
import { ERROR_STATUS, type WebhookErrorCode } from './errors.js'

/** How a delivery ended, as reported to `onResult`. */
export type WebhookOutcome =
  | 'processed'
  | 'duplicate'
  | 'ignored'
  | 'in_flight'
  | 'handler_failed'
  | 'store_unavailable'
  | 'refused'
  | 'method_not_allowed'
  | 'accepted'
  | 'inbox_unavailable'

/** One row of the answers table. */
export interface AnswerRow {
  outcome: WebhookOutcome
  status: number
  /** The JSON body. Refusals and failures carry `{ ok: false, code }`. */
  body: Readonly<Record<string, unknown>>
  /** Sent with `Retry-After` (the receiver's `retryAfterSeconds`): the sender should come back. */
  retryAfter?: true
  /** Extra response headers. */
  headers?: Readonly<Record<string, string>>
  /** The connection is closed after the answer (a body that never finished arriving). */
  close?: true
}

function refusal(code: WebhookErrorCode): AnswerRow {
  const row: AnswerRow = { outcome: 'refused', status: ERROR_STATUS[code], body: { ok: false, code } }
  if (code === 'body_timeout') return { ...row, retryAfter: true, close: true }
  // The other 5xx refusals about secrets (a lookup that failed, a change in progress) are worth coming back for soon.
  return code === 'secret_lookup_failed' || code === 'secret_pending' ? { ...row, retryAfter: true } : row
}

const refusals = Object.fromEntries(
  (Object.keys(ERROR_STATUS) as WebhookErrorCode[]).map((code) => [code, refusal(code)]),
) as Record<WebhookErrorCode, AnswerRow>

/**
 * Every answer by name. A refusal's name is its {@link WebhookErrorCode}.
 *
 * @example
 * ANSWERS.in_flight // { outcome: 'in_flight', status: 429, body: { ok: false, code: 'in_flight' }, retryAfter: true }
 */
export const ANSWERS = {
  processed: { outcome: 'processed', status: 200, body: { ok: true } },
  duplicate: { outcome: 'duplicate', status: 200, body: { ok: true, duplicate: true } },
  ignored: { outcome: 'ignored', status: 200, body: { ok: true, ignored: true } },
  // Never 409: the sender treats it as permanent and would drop a delivery still being processed.
  in_flight: { outcome: 'in_flight', status: 429, body: { ok: false, code: 'in_flight' }, retryAfter: true },
  // The claim is released, so the sender's retry runs the handler again.
  handler_failed: { outcome: 'handler_failed', status: 500, body: { ok: false, code: 'handler_failed' } },
  store_unavailable: { outcome: 'store_unavailable', status: 503, body: { ok: false, code: 'store_unavailable' }, retryAfter: true },
  // Appended to a durable inbox: a worker runs the handler later.
  accepted: { outcome: 'accepted', status: 202, body: { ok: true, accepted: true } },
  inbox_unavailable: { outcome: 'inbox_unavailable', status: 503, body: { ok: false, code: 'inbox_unavailable' }, retryAfter: true },
  method_not_allowed: { outcome: 'method_not_allowed', status: 405, body: { ok: false, code: 'method_not_allowed' }, headers: { allow: 'POST' } },
  // Anything unexpected: 500, so the sender retries once it is fixed.
  internal_error: { outcome: 'refused', status: 500, body: { ok: false, code: 'internal_error' } },
  ...refusals,
} as const satisfies Record<string, AnswerRow>

/** The name of a row of {@link ANSWERS}. */
export type AnswerName = keyof typeof ANSWERS

/** The `code` in an answer's JSON body. */
export type WebhookAnswerCode = Exclude<AnswerName, 'processed'>

/** The answer to send: adapters copy it to their framework's response as is. */
export interface WebhookResponse {
  status: number
  headers: Record<string, string>
  body: string
  /** Close the connection after sending (the request body never finished arriving). */
  close?: boolean
}

/** The table rendered once per receiver: each row's response, built once and shared. */
export type RenderedAnswers = Readonly<Record<AnswerName, WebhookResponse>>

const JSON_TYPE = 'application/json'

/** Renders every row with this receiver's `Retry-After`, so a request only picks a prebuilt answer. */
export function renderAnswers(retryAfterSeconds: number): RenderedAnswers {
  const retryAfter = String(Math.ceil(retryAfterSeconds))
  const out = {} as Record<AnswerName, WebhookResponse>
  for (const name of Object.keys(ANSWERS) as AnswerName[]) {
    const row: AnswerRow = ANSWERS[name]
    const headers: Record<string, string> = { 'content-type': JSON_TYPE, ...row.headers }
    if (row.retryAfter) headers['retry-after'] = retryAfter
    out[name] = Object.freeze({
      status: row.status,
      headers: Object.freeze(headers) as Record<string, string>,
      body: JSON.stringify(row.body),
      ...(row.close ? { close: true } : {}),
    })
  }
  return Object.freeze(out)
}

/** The table with the default `Retry-After` (5 s), for answers given outside a receiver. */
export const DEFAULT_ANSWERS = renderAnswers(5)
