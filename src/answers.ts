/**
 * The answers table as data (DESIGN.md "Answers, idempotency, and the sender's retry rules"):
 * every way a delivery can end, each row with every fact of its answer: the outcome reported to
 * `onResult`, the status, the JSON body, `Retry-After`, closing the connection, and the cause and
 * fix a person reads. The sender retries 5xx and 429 and drops every other 4xx
 * (spec/service-api.md §6.3), so each row is a promise about data. Everything else is read from
 * these rows: `ERROR_STATUS` and {@link WebhookErrorCode} (the refusals), `WebhookOutcome`, the
 * default log line's fix, the CLI (`doctor`, `verify`, `send`) and the README's error table.
 * The cause and fix are short and never quote input; the CLI's longer explanations (code
 * snippets, what a command can check) live in src/cli/fixes.ts, outside the core bundle.
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
  /** Why a delivery gets this answer, in a few words; never quotes the request. */
  cause: string
  /** What to change, in a few words; never quotes the request. */
  fix: string
}

// Texts used by several rows: one wording each.
const FORWARD = 'forward every svc-webhook-* header'
const UNCHANGED = 'forward the header unchanged'

/** A refusal's row: outcome `refused`, body `{ ok: false, code }` (a test checks the code is the row's name). */
const refused = <C extends string, S extends number>(code: C, status: S, cause: string, fix: string) =>
  ({ outcome: 'refused', status, body: { ok: false, code }, cause, fix }) as const

/**
 * The refusals of a request that cannot be verified or accepted: each is a
 * {@link WebhookErrorCode}, thrown as a `WebhookVerificationError` with its status.
 */
const REFUSALS = {
  // The raw bytes are gone: a mounting bug. 500 so the sender retries once it is fixed.
  body_already_parsed: refused(
    'body_already_parsed',
    500,
    'a body parser consumed the body before the receiver',
    'mount the webhook route before express.json() (see docs/express.md); 500 so the sender retries once fixed',
  ),
  body_too_large: refused('body_too_large', 413, 'the body is over maxBodyBytes', 'raise maxBodyBytes if deliveries this large are expected'),
  missing_id: refused('missing_id', 400, 'no svc-webhook-id header', FORWARD),
  invalid_id: refused('invalid_id', 400, 'the id is empty, repeated, over 256 characters or not visible ASCII', UNCHANGED),
  missing_timestamp: refused('missing_timestamp', 400, 'no svc-webhook-timestamp header', FORWARD),
  invalid_timestamp: refused('invalid_timestamp', 400, 'the timestamp is not decimal Unix seconds', UNCHANGED),
  timestamp_too_old: refused(
    'timestamp_too_old',
    401,
    'the signed timestamp is more than toleranceSeconds in the past',
    "a replay, or this host's clock is behind: check NTP; do not raise the tolerance to hide it",
  ),
  timestamp_in_future: refused('timestamp_in_future', 401, 'the signed timestamp is more than toleranceSeconds ahead', "this host's clock is behind: check NTP"),
  missing_signature: refused(
    'missing_signature',
    401,
    'no svc-webhook-signature-v2 (nor -signature) header',
    'make sure the request comes from the service and your proxy forwards every svc-webhook-* header',
  ),
  v1_not_allowed: refused(
    'v1_not_allowed',
    401,
    'only the legacy v1 signature, and allowV1 is off',
    'the service sends v2 on every delivery: a proxy dropped it; allowV1: true only for a legacy sender',
  ),
  invalid_signature: refused(
    'invalid_signature',
    401,
    'no signature matched any configured secret',
    "use the endpoint's current secret, whole, prefix included (both during a rotation); verify the raw bytes, not re-serialized JSON",
  ),
  invalid_json: refused('invalid_json', 400, 'the verified body is not UTF-8 JSON with a string event', 'nothing on your side: it is not an event'),
  // 503, never 408: a 408 is a permanent 4xx to the sender. The connection is closed, as the rest of the body may never come.
  body_timeout: {
    ...refused('body_timeout', 503, 'the body was still arriving after bodyTimeoutMs', 'a slow client or proxy; retried by the sender'),
    retryAfter: true,
    close: true,
  },
  unknown_endpoint: refused(
    'unknown_endpoint',
    404,
    'the secret function returned no secret for this request',
    "register the endpoint's secret, or throw while you cannot tell (503, retried)",
  ),
  // A lookup that failed and a change in progress are worth coming back for soon.
  secret_lookup_failed: {
    ...refused(
      'secret_lookup_failed',
      503,
      'the secret or endpoint function threw (database or vault down), or the secret source could not be read in time or holds an unusable value',
      'fix the store; cache secrets (docs/multi-tenant.md); retried by the sender',
    ),
    retryAfter: true,
  },
  secret_pending: {
    ...refused(
      'secret_pending',
      503,
      'no secret of the secret source matched, even after re-reading it, while it says a change is in progress (pendingUntil: a rotation, a new endpoint)',
      'nothing while it finishes: retried by the sender; if it lasts (at most maxPendingMs, 60 s), rotate again or write the new secret (docs/secret-sources.md)',
    ),
    retryAfter: true,
  },
} as const satisfies Record<string, Row>

/**
 * Every answer by name. A refusal's name is its {@link WebhookErrorCode}.
 *
 * @example
 * ANSWERS.in_flight.status // 429, with Retry-After: the sender comes back
 * ANSWERS.body_timeout.fix // 'a slow client or proxy; retried by the sender'
 */
export const ANSWERS = {
  processed: { outcome: 'processed', status: 200, body: { ok: true }, cause: 'verified, and the handler succeeded', fix: 'nothing: the delivery is done' },
  duplicate: {
    outcome: 'duplicate',
    status: 200,
    body: { ok: true, duplicate: true },
    cause: 'the id was already processed (a retry or a manual resend)',
    fix: 'nothing: the handler is not run again',
  },
  ignored: {
    outcome: 'ignored',
    status: 200,
    body: { ok: true, ignored: true },
    cause: 'no handler in `on` for this event type',
    fix: 'name a handler for it in `on` if the event matters (a misspelled key lands here)',
  },
  // Never 409: the sender treats it as permanent and would drop a delivery still being processed.
  in_flight: {
    outcome: 'in_flight',
    status: 429,
    body: { ok: false, code: 'in_flight' },
    retryAfter: true,
    cause: 'another request with the same delivery id was being processed',
    fix: 'nothing, when a retry overlaps a slow first attempt: the sender comes back after Retry-After and gets 200 duplicate once it is done',
  },
  // The claim is released, so the sender's retry runs the handler again.
  handler_failed: {
    outcome: 'handler_failed',
    status: 500,
    body: { ok: false, code: 'handler_failed' },
    cause: 'the handler threw',
    fix: 'fix the handler, or use `inbox` so failures are retried without failing the sender; the claim is released, so the retry runs it again',
  },
  store_unavailable: {
    outcome: 'store_unavailable',
    status: 503,
    body: { ok: false, code: 'store_unavailable' },
    retryAfter: true,
    cause: 'the idempotency store (Redis, Postgres) did not answer',
    fix: "check the store's connection from the receiver; retried by the sender after Retry-After",
  },
  // Appended to a durable inbox: a worker runs the handler later.
  accepted: {
    outcome: 'accepted',
    status: 202,
    body: { ok: true, accepted: true },
    cause: 'stored in the durable inbox',
    fix: 'nothing: a worker runs the handler later',
  },
  inbox_unavailable: {
    outcome: 'inbox_unavailable',
    status: 503,
    body: { ok: false, code: 'inbox_unavailable' },
    retryAfter: true,
    cause: 'the durable inbox did not take the delivery',
    fix: "check the inbox's connection from the receiver; retried by the sender after Retry-After",
  },
  method_not_allowed: {
    outcome: 'method_not_allowed',
    status: 405,
    body: { ok: false, code: 'method_not_allowed' },
    headers: { allow: 'POST' },
    cause: 'the route accepts only POST',
    fix: 'the service always POSTs: check nothing on the way turns it into another method (a redirect does)',
  },
  // Anything unexpected: 500, so the sender retries once it is fixed.
  internal_error: refused('internal_error', 500, 'an unexpected error in the receiver', "see the receiver's log; retried by the sender"),
  ...REFUSALS,
} as const satisfies Record<string, Row>

/** The name of a row of {@link ANSWERS}. */
export type AnswerName = keyof typeof ANSWERS

/** How a delivery ended, as reported to `onResult`: the `outcome` of a row of {@link ANSWERS}. */
export type WebhookOutcome = (typeof ANSWERS)[AnswerName]['outcome']

/** One row of the answers table. */
export interface AnswerRow extends Omit<Row, 'outcome'> {
  outcome: WebhookOutcome
}

/** The `code` of a `WebhookVerificationError`: a refusal of a request that cannot be verified or accepted. */
export type WebhookErrorCode = keyof typeof REFUSALS

/**
 * Every refusal code with the status it is answered with: the `status` column of the refusal
 * rows of {@link ANSWERS}.
 *
 * @example
 * ERROR_STATUS.body_timeout // 503: the sender retries
 */
export const ERROR_STATUS = Object.fromEntries(Object.entries(REFUSALS).map(([code, row]) => [code, row.status])) as {
  readonly [C in WebhookErrorCode]: (typeof REFUSALS)[C]['status']
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
