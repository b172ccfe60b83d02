/**
 * The answers table as data (DESIGN.md "Answers, idempotency, and the sender's retry rules"):
 * every way a delivery can end, each row with every fact of its answer: the outcome reported to
 * `onResult`, the status, the JSON body, `Retry-After` and closing the connection. The sender
 * retries 5xx and 429 and drops every other 4xx (spec/service-api.md §6.3), so each row is a
 * promise about data. `ERROR_STATUS`, {@link WebhookErrorCode} and `WebhookOutcome` are read from
 * these rows. The cause and fix a person reads are in src/answer-texts.ts, imported only by what
 * prints them (the default log line, the CLI, the public `ANSWERS`): a Worker that verifies
 * carries none of that text.
 */

/** What a row holds; `outcome` is any string here so that `WebhookOutcome` can be read from the rows. */
interface Row {
  outcome: string
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

/** A refusal's row: outcome `refused`, body `{ ok: false, code }` (a test checks the code is the row's name). */
const refused = <C extends string, S extends number>(code: C, status: S) => ({ outcome: 'refused', status, body: { ok: false, code } }) as const

/**
 * Every refusal code with the status it is answered with: the source of the refusal rows below,
 * and all that verifying needs of the table (a bundle that only verifies carries no row).
 *
 * @example
 * ERROR_STATUS.body_timeout // 503: the sender retries
 */
export const ERROR_STATUS = {
  // The raw bytes are gone: a mounting bug. 500 so the sender retries once it is fixed.
  body_already_parsed: 500,
  body_too_large: 413,
  missing_id: 400,
  invalid_id: 400,
  missing_timestamp: 400,
  invalid_timestamp: 400,
  timestamp_too_old: 401,
  timestamp_in_future: 401,
  missing_signature: 401,
  v1_not_allowed: 401,
  invalid_signature: 401,
  invalid_json: 400,
  // 503, never 408: a 408 is a permanent 4xx to the sender.
  body_timeout: 503,
  unknown_endpoint: 404,
  // A lookup that failed and a change in progress are worth coming back for soon.
  secret_lookup_failed: 503,
  secret_pending: 503,
} as const

/** The `code` of a `WebhookVerificationError`: a refusal of a request that cannot be verified or accepted. */
export type WebhookErrorCode = keyof typeof ERROR_STATUS

/** What a refusal's row adds to its status: `Retry-After` for those worth coming back for soon; a body that never finished arriving also closes the connection, as the rest may never come. */
const REFUSAL_EXTRAS: { readonly [C in WebhookErrorCode]?: Pick<Row, 'retryAfter' | 'close'> } = {
  body_timeout: { retryAfter: true, close: true },
  secret_lookup_failed: { retryAfter: true },
  secret_pending: { retryAfter: true },
}

/**
 * The refusals of a request that cannot be verified or accepted, one row per
 * {@link WebhookErrorCode}, each thrown as a `WebhookVerificationError` with its status.
 */
// Built inside pure functions: a bundle that only verifies (it needs ERROR_STATUS alone) drops the rows.
const REFUSALS = /* @__PURE__ */ (() => {
  const rows = {} as Record<string, Row>
  for (const code of Object.keys(ERROR_STATUS) as WebhookErrorCode[]) rows[code] = { ...refused(code, ERROR_STATUS[code]), ...REFUSAL_EXTRAS[code] }
  return rows as { readonly [C in WebhookErrorCode]: ReturnType<typeof refused<C, (typeof ERROR_STATUS)[C]>> & { readonly retryAfter?: true; readonly close?: true } }
})()

/**
 * Every answer by name, without its texts (the public `ANSWERS` adds them). A refusal's name is
 * its {@link WebhookErrorCode}.
 *
 * @example
 * ANSWER_ROWS.in_flight.status // 429, with Retry-After: the sender comes back
 */
export const ANSWER_ROWS = /* @__PURE__ */ (() => ({
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
  internal_error: refused('internal_error', 500),
  ...REFUSALS,
}) as const satisfies Record<string, Row>)()

/** The name of a row of {@link ANSWER_ROWS}. */
export type AnswerName = keyof typeof ANSWER_ROWS

/** How a delivery ended, as reported to `onResult`: the `outcome` of a row of {@link ANSWER_ROWS}. */
export type WebhookOutcome = (typeof ANSWER_ROWS)[AnswerName]['outcome']

/** One row of the answers table, without its texts. */
export interface AnswerFacts extends Omit<Row, 'outcome'> {
  outcome: WebhookOutcome
}

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
  for (const name of Object.keys(ANSWER_ROWS) as AnswerName[]) {
    const row: AnswerFacts = ANSWER_ROWS[name]
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

/** The table with the default `Retry-After` (5 s), for answers given outside a receiver. Pure: a bundle that never answers drops it. */
export const DEFAULT_ANSWERS = /* @__PURE__ */ renderAnswers(5)
