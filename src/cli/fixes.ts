/**
 * What each answer code means and how to fix it, for the CLI: `verify` explains a captured
 * request with it, `send` prints it under a refusal, `doctor` under a failing row. The cause and
 * fix are the rows of the answers table (src/answers.ts), the same the log and the README give.
 * The split: the table holds the short cause and fix and ships in the core, where every byte
 * counts; this file holds only what the CLI says at more length for a few codes (a mounting
 * snippet, what a wrong secret looks like on a receiver of many endpoints, how to check the
 * clock), keyed by code, and never ships in the core.
 */
import { ANSWERS, type AnswerName } from '../answer-texts.js'

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

const CLOCK =
  "the service stamps each attempt with the current time, so a clock is off: check NTP on the receiver's host (timedatectl, chrony). " +
  'Raising toleranceSeconds hides the problem and widens the replay window.'

/** Where the CLI says more than the answers table; a text given here replaces the row's. */
const LONGER: { readonly [C in RefusalCode]?: Partial<Fix> } = {
  body_already_parsed: {
    fix: 'mount webhooks() before express.json() (or any body parser): app.post(path, webhooks(options)) above app.use(express.json()), or give this route express.raw({ type: "*/*" }).',
  },
  timestamp_too_old: { fix: CLOCK },
  timestamp_in_future: { fix: CLOCK },
  v1_not_allowed: {
    fix: 'forward svc-webhook-signature-v2 (the service sends it on every delivery). Only for a legacy sender that cannot send v2: allowV1: true (v1 does not cover the id, so such deliveries are not deduplicated).',
  },
  invalid_signature: {
    fix:
      `both sides must use ${SAME_SECRET}. On a receiver of many endpoints (one secret per tenant), that is the secret of the endpoint the URL names. ` +
      `If they do, the receiver is verifying a re-serialized body instead; ${RAW_BYTES}. "npx svc-webhooks verify" on a captured request tells which.`,
  },
  // Seen from the sending side, where the receiver's secret lookup is a black box.
  unknown_endpoint: {
    cause: "the receiver's secret lookup found no secret for this request (one receiver, many endpoints)",
    fix: 'check how the receiver tells endpoints apart (path, host, a header) and that this endpoint is registered with its secret.',
  },
  secret_lookup_failed: {
    cause: "the receiver's secret lookup failed (its database or vault did not answer), or its secret source could not be read or holds an unusable value",
    fix: "see the receiver's log; the service retries a 503. A source that holds an unusable value needs a valid state written to it ({ secrets: [\"svc_whsec_...\"] }).",
  },
}

/**
 * Each refusal's cause and fix: the answers table's row, or the CLI's longer text. A cause ends
 * without a period, a fix with one.
 *
 * @example
 * FIXES.body_too_large.fix // 'raise maxBodyBytes if deliveries this large are expected.'
 */
export const FIXES = Object.fromEntries(
  (Object.keys(ANSWERS) as AnswerName[])
    .filter((code): code is RefusalCode => ANSWERS[code].status >= 300)
    .map((code) => [code, { cause: LONGER[code]?.cause ?? ANSWERS[code].cause, fix: LONGER[code]?.fix ?? `${ANSWERS[code].fix}.` }]),
) as { readonly [C in RefusalCode]: Fix }

/**
 * Whether a 2xx answer says the delivery was acknowledged without running anything: the
 * answers table's `ignored` row (`{ ok: true, ignored: true }`), for an event type with no handler.
 */
export function answeredIgnored(body: string): boolean {
  return flagged(body, 'ignored')
}

/** The answer marks the delivery a duplicate (`{ ok: true, duplicate: true }`): its handler did not run again. */
export function answeredDuplicate(body: string): boolean {
  return flagged(body, 'duplicate')
}

function flagged(body: string, flag: 'ignored' | 'duplicate'): boolean {
  try {
    return (JSON.parse(body) as Record<string, unknown> | null)?.[flag] === true
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
