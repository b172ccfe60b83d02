/**
 * What each answer code means and how to fix it, written once for the CLI: `verify` explains a
 * captured request with it, `send` prints it under a refusal, `doctor` under a failing row. The
 * codes are the rows of the answers table (src/answers.ts) that are not a 2xx.
 */
import type { AnswerName, ANSWERS } from '../answers.js'

/** A cause, in a few words, and what to change. */
export interface Fix {
  cause: string
  fix: string
}

/** The answers table rows that are not a 2xx: a new one in the core is a type error here until it has its fix. */
export type RefusalCode = { [K in AnswerName]: `${(typeof ANSWERS)[K]['status']}` extends `2${string}` ? never : K }[AnswerName]

/** The secret to sign and verify with, as the service issued it. */
export const SAME_SECRET =
  "the endpoint's current secret, exactly as the service returned it (\"svc_whsec_\" prefix included). " +
  'Rotating it stops the old one at once: during your deploy, configure both (secret: [newSecret, oldSecret])'

/** Verifying the bytes as received. */
export const RAW_BYTES =
  'verify the raw request bytes as received: mount the webhook route before express.json() (or use express.raw({ type: "*/*" }), await request.arrayBuffer())'

const FORWARD = 'the service sends every svc-webhook-* header on every delivery: make sure the proxy, load balancer or framework in front of the receiver forwards them unchanged.'
const CLOCK =
  "the service stamps each attempt with the current time, so a clock is off: check NTP on the receiver's host (timedatectl, chrony). " +
  'Raising toleranceSeconds hides the problem and widens the replay window.'
const RETRIED = "see the receiver's log; the service retries a 5xx."

/**
 * Each refusal's cause and fix.
 *
 * @example
 * FIXES.body_already_parsed.fix // 'mount webhooks() before express.json() ...'
 */
export const FIXES: { readonly [C in RefusalCode]: Fix } = {
  body_already_parsed: {
    cause: 'a body parser read the request before svc-webhooks did, so the raw bytes the signature covers are gone',
    fix: 'mount webhooks() before express.json() (or any body parser): app.post(path, webhooks(options)) above app.use(express.json()), or give this route express.raw({ type: "*/*" }).',
  },
  body_too_large: { cause: 'the body is over maxBodyBytes (1 MiB by default)', fix: 'raise maxBodyBytes if deliveries this large are expected.' },
  missing_id: { cause: 'the request has no svc-webhook-id header', fix: FORWARD },
  invalid_id: {
    cause: 'svc-webhook-id is empty, repeated, too long or holds characters a delivery id never has',
    fix: 'the service sends one UUID: check that nothing on the way repeats or rewrites svc-webhook-id.',
  },
  missing_timestamp: { cause: 'the request has no svc-webhook-timestamp header', fix: FORWARD },
  invalid_timestamp: {
    cause: 'svc-webhook-timestamp is not decimal Unix seconds',
    fix: 'the service always sends digits only: something rewrote the header, or the request is not from the service.',
  },
  timestamp_too_old: { cause: 'the signed timestamp is further in the past than the tolerance (300 s by default)', fix: CLOCK },
  timestamp_in_future: { cause: 'the signed timestamp is further in the future than the tolerance (300 s by default)', fix: CLOCK },
  missing_signature: { cause: 'the request has no svc-webhook-signature-v2 header (nor svc-webhook-signature)', fix: FORWARD },
  v1_not_allowed: {
    cause: 'only the legacy v1 signature arrived, and v2 is required by default',
    fix: 'forward svc-webhook-signature-v2 (the service sends it on every delivery). Only for a legacy sender that cannot send v2: allowV1: true (v1 does not cover the id, so such deliveries are not deduplicated).',
  },
  invalid_signature: {
    cause: "no signature matched the receiver's secret over the bytes it verified",
    fix:
      `both sides must use ${SAME_SECRET}. On a receiver of many endpoints (one secret per tenant), that is the secret of the endpoint the URL names. ` +
      `If they do, the receiver is verifying a re-serialized body instead; ${RAW_BYTES}. "npx svc-webhooks verify" on a captured request tells which.`,
  },
  invalid_json: { cause: 'the signature is valid but the body is not a UTF-8 JSON object with a string "event"', fix: 'the service always sends a JSON event: check nothing on the way changes the body.' },
  body_timeout: {
    cause: 'the body was still arriving when the read deadline (bodyTimeoutMs, 10 s by default) passed',
    fix: 'the service retries a 503. If it keeps happening, look for a slow network path or a proxy that trickles the body.',
  },
  unknown_endpoint: {
    cause: "the receiver's secret lookup found no secret for this request (one receiver, many endpoints)",
    fix: 'check how the receiver tells endpoints apart (path, host, a header) and that this endpoint is registered with its secret.',
  },
  secret_lookup_failed: {
    cause: "the receiver's secret lookup failed (its database or vault did not answer), or its secret source could not be read or holds an unusable value",
    fix: `${RETRIED} A source that holds an unusable value needs a valid state written to it ({ secrets: ["svc_whsec_..."] }).`,
  },
  secret_pending: {
    cause: "no signature matched the secrets of the receiver's secret source while it says a secret change (a rotation, a new endpoint) is in progress",
    fix:
      'nothing while the rotation or registration finishes: the service retries a 503, and the delivery passes once the new secret is stored. ' +
      'If it lasts (at most maxPendingMs, 60 s by default), the writer stopped midway: rotate again, or write the new secret to the source.',
  },
  in_flight: {
    cause: 'another request with the same delivery id was being processed',
    fix: 'nothing, when a retry overlaps a slow first attempt: the service retries after Retry-After and gets 2xx duplicate once the first attempt is done.',
  },
  handler_failed: { cause: 'the handler threw', fix: "see the receiver's log for the error. The claim on the id is released, so the service's retry runs the handler again." },
  store_unavailable: { cause: 'the idempotency store (Redis, Postgres) did not answer', fix: "check the store's connection from the receiver; the service retries a 503." },
  inbox_unavailable: { cause: 'the durable inbox did not acknowledge the append', fix: "check the inbox's connection from the receiver; the service retries a 503." },
  method_not_allowed: { cause: 'the route accepts only POST', fix: 'the service always POSTs: check that nothing on the way turns it into another method (a redirect does).' },
  internal_error: { cause: 'an unexpected error in the receiver', fix: RETRIED },
}

/**
 * Whether a 2xx answer says the delivery was acknowledged without running anything: the
 * answers table's `ignored` row (`{ ok: true, ignored: true }`), for an event type with no handler.
 */
export function answeredIgnored(body: string): boolean {
  try {
    return (JSON.parse(body) as { ignored?: unknown } | null)?.ignored === true
  } catch {
    return false
  }
}

/**
 * The cause and fix of a delivery of a known event type answered `ignored`.
 *
 * @example
 * noHandler('message.received').cause // 'no handler for message.received in `on`: misspelled key?'
 */
export function noHandler(type: string): Fix {
  return {
    cause: `no handler for ${type} in \`on\`: misspelled key?`,
    fix:
      `name the handler '${type}' exactly in \`on\`: the receiver verified the delivery and acknowledged it (200 ignored) without running anything ` +
      '(at startup it logs a warning for an `on` key that is not a known event type).',
  }
}

/**
 * A refusal that is not an answer of svc-webhooks: the framework found no route for POST at the
 * URL (a 404 or 405 without a code), so nothing was verified.
 */
export const NO_ROUTE: Fix = {
  cause: 'no webhook route answered: this is the framework\'s own "not found" (no svc-webhooks code in the answer)',
  fix: 'check the path (and the method, POST) the webhook route is mounted on, and give that exact URL: e.g. app.post("/webhooks/svc", webhooks(...)) is http://host:port/webhooks/svc.',
}

/** The fix for a correctly signed sample refused with invalid_signature: re-serializing it changes nothing, so the secret differs. */
export const OTHER_SECRET: Fix = {
  cause: 'the receiver verifies with another secret than the one this command signs with',
  fix:
    `give both ${SAME_SECRET}. On a receiver of many endpoints (one secret per tenant), that is the secret of the endpoint the URL names. ` +
    '(The body sent reads the same after JSON.parse and JSON.stringify, so a re-serialized body is not the cause.)',
}

/** The code in a receiver's answer: the `code` of a JSON body, else a known code named in the text (an error page). */
export function answerCode(body: string): RefusalCode | undefined {
  let code: unknown
  try {
    code = (JSON.parse(body) as { code?: unknown } | null)?.code
  } catch {
    // Not JSON: an error page may still name the code.
  }
  if (typeof code === 'string' && Object.hasOwn(FIXES, code)) return code as RefusalCode
  return (Object.keys(FIXES) as RefusalCode[]).find((name) => new RegExp(`\\b${name}\\b`).test(body))
}
