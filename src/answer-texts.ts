/**
 * The cause and fix of every answer, in a few words each, never quoting the request: what the
 * default log line prints after the code (a refusal's line: its error's message, which says what
 * was wrong with this request, then the fix), what `doctor`, `send` and `verify` start from (their
 * longer explanations are in src/cli/fixes.ts), and the README's error table. Apart from the
 * rows (src/answers.ts) and the errors (a refusal's message holds no fix) so that only what prints
 * them carries this text: `verifyWebhook`, and a Worker whose receiver logs elsewhere, bundle none of it.
 */
import { ANSWER_ROWS, type AnswerFacts, type AnswerName, type WebhookErrorCode } from './answers.js'

type RefusalName = WebhookErrorCode | 'internal_error'

export type { AnswerName } from './answers.js'

/** What a person reads about an answer. */
export interface AnswerText {
  /** Why a delivery gets this answer, in a few words; never quotes the request. */
  cause: string
  /** What to change, in a few words; never quotes the request. */
  fix: string
}

// Texts used by several rows: one wording each.
const FORWARD = 'forward every svc-webhook-* header'
const UNCHANGED = 'forward the header unchanged'

/** The answers, not refusals, that fail a delivery (a 5xx the sender retries): the ones the receiver's log line prints. */
type FailureName = { [N in Exclude<AnswerName, RefusalName>]: `${(typeof ANSWER_ROWS)[N]['status']}` extends `5${string}` ? N : never }[Exclude<AnswerName, RefusalName>]

/**
 * The cause and fix of each failure that is not a refusal: what the receiver's default log line
 * prints for it (a refusal's line prints its error's message and the fix instead). Apart from the
 * other rows' texts, which only `doctor`, the README and `ANSWERS` print, so a receiver's bundle
 * carries these three alone.
 */
const FAILURE_TEXTS = {
  handler_failed: {
    cause: 'the handler threw',
    fix: 'fix the handler, or use `inbox` so failures are retried without failing the sender; the claim is released, so the retry runs it again',
  },
  store_unavailable: {
    cause: 'the idempotency store (Redis, Postgres) did not answer',
    fix: "check the store's connection from the receiver; retried by the sender after Retry-After",
  },
  inbox_unavailable: {
    cause: 'the durable inbox did not take the delivery',
    fix: "check the inbox's connection from the receiver; retried by the sender after Retry-After",
  },
} as const satisfies Record<FailureName, AnswerText>

/** The cause and fix of each answer that is neither a refusal nor a failure: for `ANSWERS` (doctor, the README). */
const OTHER_TEXTS = {
  processed: {
    cause: 'verified, and the handler succeeded',
    fix: 'nothing: the delivery is done',
  },
  duplicate: {
    cause: 'the id was already processed (a retry or a manual resend)',
    fix: 'nothing: the handler is not run again',
  },
  ignored: {
    cause: 'no handler in `on` for this event type',
    fix: 'name a handler for it in `on` if the event matters (a misspelled key lands here)',
  },
  in_flight: {
    cause: 'another request with the same delivery id was being processed',
    fix: 'nothing, when a retry overlaps a slow first attempt: the sender comes back after Retry-After and gets 200 duplicate once it is done',
  },
  accepted: {
    cause: 'stored in the durable inbox',
    fix: 'nothing: a worker runs the handler later',
  },
  method_not_allowed: {
    cause: 'the route accepts only POST',
    fix: 'the service always POSTs: check nothing on the way turns it into another method (a redirect does)',
  },
} as const satisfies Record<Exclude<AnswerName, RefusalName | FailureName>, AnswerText>

/**
 * The cause of each refusal: printed by `doctor`, `send` and `verify`, and the README's table. A
 * refusal's log line gives its error's message instead, which says what was wrong with that request.
 */
const REFUSAL_CAUSES = {
  internal_error: 'an unexpected error in the receiver',
  body_already_parsed: 'a body parser consumed the body before the receiver',
  body_too_large: 'the body is over maxBodyBytes',
  missing_id: 'no svc-webhook-id header',
  invalid_id: 'the id is empty, repeated, over 256 characters or not visible ASCII',
  missing_timestamp: 'no svc-webhook-timestamp header',
  invalid_timestamp: 'the timestamp is not decimal Unix seconds',
  timestamp_too_old: 'the signed timestamp is more than toleranceSeconds in the past',
  timestamp_in_future: 'the signed timestamp is more than toleranceSeconds ahead',
  missing_signature: 'no svc-webhook-signature-v2 (nor -signature) header',
  v1_not_allowed: 'only the legacy v1 signature, and allowV1 is off',
  invalid_signature: 'no signature matched any configured secret',
  invalid_json: 'the verified body is not UTF-8 JSON with a string event',
  body_timeout: 'the body was still arriving after bodyTimeoutMs',
  unknown_endpoint: 'the secret function returned no secret for this request',
  secret_lookup_failed: 'the secret or endpoint function threw (database or vault down), or the secret source could not be read in time or holds an unusable value',
  secret_pending: 'no secret of the secret source matched, even after re-reading it, while it says a change is in progress (pendingUntil: a rotation, a new endpoint)',
} as const satisfies Record<RefusalName, string>

/**
 * The fix of each refusal: what a refusal's log line adds to its error's message, and what `doctor`,
 * `send`, `verify` and the README's table print. Apart from the causes so that a receiver's bundle,
 * whose log line prints only the fix, carries no cause.
 */
const REFUSAL_FIXES = {
  internal_error: "see the receiver's log; retried by the sender",
  body_already_parsed: 'mount the route before express.json(), c.req.json() or a validator (docs/express.md); Next.js Pages: export const config = { api: { bodyParser: false } }',
  body_too_large: 'raise maxBodyBytes if deliveries this large are expected',
  missing_id: FORWARD,
  invalid_id: UNCHANGED,
  missing_timestamp: FORWARD,
  invalid_timestamp: UNCHANGED,
  timestamp_too_old: "a replay, or this host's clock is behind: check NTP; do not raise the tolerance to hide it",
  timestamp_in_future: "this host's clock is behind: check NTP",
  missing_signature: 'make sure the request comes from the service and your proxy forwards every svc-webhook-* header',
  v1_not_allowed: 'the service sends v2 on every delivery: check that a proxy forwards svc-webhook-signature-v2; allowV1: true only for a legacy sender',
  invalid_signature: "use the endpoint's current secret, whole, prefix included (both during a rotation); verify the raw bytes, not re-serialized JSON",
  invalid_json: 'nothing on your side: it is not an event',
  body_timeout: 'a slow client or proxy; retried by the sender',
  unknown_endpoint: "register the endpoint's secret, or throw while you cannot tell (503, retried)",
  secret_lookup_failed: "fix the store, or write a valid state to the source ({ secrets: ['svc_whsec_...'] }); cache secrets (docs/multi-tenant.md); retried by the sender",
  secret_pending: 'nothing while it finishes: retried by the sender; if it lasts (at most maxPendingMs, 60 s), rotate again or write the new secret (docs/secret-sources.md)',
} as const satisfies Record<RefusalName, string>

/** One row of the answers table, with its texts. */
export interface AnswerRow extends AnswerFacts, AnswerText {}

/**
 * Every answer by name, each with every fact of its answer and the cause and fix a person
 * reads. A refusal's name is its `WebhookErrorCode`.
 *
 * @example
 * ANSWERS.in_flight.status // 429, with Retry-After: the sender comes back
 * ANSWERS.body_timeout.fix // 'a slow client or proxy; retried by the sender'
 */
export const ANSWERS = /* @__PURE__ */ withTexts()

type RefusalTexts = { [N in RefusalName]: { cause: (typeof REFUSAL_CAUSES)[N]; fix: (typeof REFUSAL_FIXES)[N] } }
type Texts = typeof OTHER_TEXTS & typeof FAILURE_TEXTS & RefusalTexts

function withTexts() {
  const texts = { ...OTHER_TEXTS, ...FAILURE_TEXTS } as Record<AnswerName, AnswerText>
  for (const name of Object.keys(REFUSAL_FIXES) as RefusalName[]) texts[name] = { cause: REFUSAL_CAUSES[name], fix: REFUSAL_FIXES[name] }
  const rows = {} as Record<AnswerName, AnswerRow>
  for (const name of Object.keys(ANSWER_ROWS) as AnswerName[]) rows[name] = Object.freeze({ ...ANSWER_ROWS[name], ...texts[name] })
  return Object.freeze(rows) as { readonly [N in AnswerName]: (typeof ANSWER_ROWS)[N] & Texts[N] }
}

/** The fix of a refusal (a `WebhookErrorCode`, or `internal_error`): what a refusal's log line adds to its message. */
export function refusalFix(code: RefusalName): string {
  return REFUSAL_FIXES[code]
}

/** The cause and fix of a failure that is not a refusal (a 5xx row: `handler_failed`...), or undefined for any other answer. */
export function failureText(name: string): AnswerText | undefined {
  return (FAILURE_TEXTS as Partial<Record<string, AnswerText>>)[name]
}
