/**
 * `svc-webhooks doctor <url>`: a conformance check of a live receiver against the sender's retry
 * rules (spec/service-api.md §6.3). Each check sends signed or deliberately bad deliveries; an
 * answer passes when the sender reads its status as it reads the status svc-webhooks answers
 * with (the answers table, src/answers.ts). Prints a pass/fail table with a fix for each failure,
 * named from the answer's code when it carries one. With `--runs-url` it also counts handler runs;
 * with `--other-secret` (a receiver of many endpoints, `<url>` one tenant's) it also checks that
 * a delivery signed with another tenant's secret is refused at this tenant's URL.
 */
import { randomUUID } from 'node:crypto'
import { ANSWERS, type AnswerName } from '../answer-texts.js'
import { sampleEvent, serializeEvent, signWebhook, type SignedWebhook, type SignWebhookOptions } from '../signing.js'
import { defineCommand, EXIT, httpUrl, integer, UsageError, type Io } from './command.js'
import { answerCode, answeredIgnored, FIXES, noHandler, OTHER_SECRET, RAW_BYTES, type RefusalCode } from './fixes.js'
import { noAnswer, post, readingOf, SENDER_TIMEOUT_MS, type Answer, type Reading } from './http.js'
import { OTHER_SECRET_FLAGS, otherSigningSecret, SECRET_FLAGS, signingSecret } from './secret.js'

type Row = { check: string; expected: string; got: string; ok: boolean; fix?: string; notRun?: true }

/** The sender's readings a passing answer may have, and how the table shows them. */
type Expected = { readings: ReadonlySet<Reading>; text: string }

const READING_TEXT: Record<Reading, string> = { delivered: '2xx', retried: '429/5xx', permanent: '4xx, not 429', redirect: '3xx' }

/** What the sender must make of the answer: what it makes of the statuses of these answers table rows. */
function expected(...names: AnswerName[]): Expected {
  const readings = new Set(names.map((name) => readingOf(ANSWERS[name].status)))
  return { readings, text: [...readings].map((r) => READING_TEXT[r]).join('/') }
}

const ACCEPTED = expected('processed')
const DUPLICATE = expected('duplicate')
const IGNORED = expected('ignored')
// Overlapping copies of one delivery: one is processed, the others wait (in flight) or find it done.
const CONCURRENT = expected('processed', 'in_flight', 'duplicate')

const nowSeconds = () => Math.floor(Date.now() / 1000)
const WINDOW = 'refuse timestamps more than 300 s away'

/** The checks' names, as their rows show them (also when they are not run). */
const CHECK = {
  handlerFirst: 'handler finished before the 2xx',
  resend: 'resend (same id, new timestamp)',
  rawBytes: 'raw bytes: body with \\u escapes',
  v1Allowed: 'v1-only (--allow-v1)',
  unknownType: 'unknown event type',
  concurrent: (n: number) => `${n} concurrent duplicates`,
}

/** The check of `--other-secret`, by name. */
const OTHER_TENANT = "another tenant's secret"

/** Deliveries that must be refused permanently, each with the answers table row that refuses it. */
interface Refusal {
  check: string
  code: RefusalCode
  /** What accepting it means. */
  why: string
  sign: (doctor: Doctor) => Partial<SignWebhookOptions>
  tamper?: true
  /** Not sent in this run. */
  skip?: (doctor: Doctor) => boolean
  /** The fix when it was accepted. @default verify before anything else and answer 401 */
  whenAccepted?: string
}

const REFUSALS: Refusal[] = [
  { check: 'tampered body', code: 'invalid_signature', why: 'it does not check the signature against the body it received', sign: () => ({}), tamper: true },
  { check: 'wrong secret', code: 'invalid_signature', why: 'it does not verify the signature with the endpoint secret', sign: () => ({ secret: `svc_whsec_${randomUUID().replace(/-/g, '')}` }) },
  {
    check: OTHER_TENANT,
    code: 'invalid_signature',
    why: "it accepts a signature made with another tenant's secret, so one tenant can post events as another",
    sign: (doctor) => ({ secret: doctor.otherSecret }),
    skip: (doctor) => doctor.otherSecret === undefined,
    whenAccepted:
      "Look the secret up from this request's own endpoint (the tenant in its path or host) and verify with that endpoint's secrets only, " +
      "never every tenant's (secret: async (req) => secretsOf(req.params.tenant), endpoint: (req) => req.params.tenant). " +
      "If --other-secret is one of this endpoint's own secrets (a rotation), pass another tenant's.",
  },
  { check: 'stale timestamp (3600 s old)', code: 'timestamp_too_old', why: `it ignores the signed timestamp, so a captured delivery can be replayed forever; ${WINDOW}`, sign: () => ({ timestamp: nowSeconds() - 3600 }) },
  { check: 'future timestamp (3600 s ahead)', code: 'timestamp_in_future', why: `it checks the timestamp in one direction only; ${WINDOW} either way`, sign: () => ({ timestamp: nowSeconds() + 3600 }) },
  {
    check: 'v1-only signature',
    code: 'v1_not_allowed',
    why: 'it accepts the legacy v1 signature, which does not cover the delivery id (rerun with --allow-v1 if you opted in for a legacy sender)',
    sign: () => ({ schemes: ['v1'] }),
    skip: (doctor) => doctor.allowV1,
  },
  { check: 'no signature', code: 'missing_signature', why: 'it accepts unsigned requests: anyone who knows the URL can post events', sign: () => ({ schemes: [] }) },
]

/**
 * Answers to the valid delivery that every other delivery would get too, before its signature is
 * even checked: the run stops there, with what to look at.
 */
const STOPS: Partial<Record<RefusalCode, (status: number) => string>> = {
  body_already_parsed: (status) => `the receiver answers every delivery ${status} body_already_parsed, so the other checks would all fail the same way.`,
  unknown_endpoint: (status) =>
    `the receiver has no secret for this URL (${status} unknown_endpoint), so the other checks would all fail the same way: ` +
    'check the endpoint (tenant) the URL names, and that the receiver has it registered with the secret this run signs with.',
  secret_lookup_failed: (status) =>
    `the receiver's secret lookup failed (${status} secret_lookup_failed), so the other checks would all fail the same way: ` +
    "see the receiver's log (its secrets store or vault did not answer), then run doctor again.",
}

/** The checks as `--help` lists them. */
const CHECK_LIST: [string, Expected, string][] = [
  ['valid delivery', ACCEPTED, 'within 10 s'],
  [CHECK.resend, DUPLICATE, 'handler not run again'],
  ['body with \\u escapes (raw bytes)', ACCEPTED, 'fails when the body is re-serialized before verifying'],
  ['tampered body, wrong secret, stale or future timestamp, v1-only, unsigned', expected(...REFUSALS.map((r) => r.code)), '2xx accepts a forgery, 429/5xx is retried'],
  [`${OTHER_TENANT} (--other-secret)`, expected('invalid_signature'), '2xx lets one tenant post as another'],
  ['concurrent duplicates', CONCURRENT, 'never a permanent 4xx; one run'],
  [CHECK.unknownType, IGNORED, 'the catalog grows'],
]

/** What the checks share. */
interface Doctor {
  allowV1: boolean
  /** Another tenant's secret (`--other-secret`): a delivery signed with it must be refused here. */
  otherSecret: string | undefined
  concurrency: number
  runsUrl: URL | undefined
  sign: (options?: Partial<SignWebhookOptions>) => Promise<SignedWebhook>
  /** POSTs `signed`, or other bytes under its signature. */
  deliver: (signed: SignedWebhook, body?: string) => Promise<Answer>
  /** The run counts, or what is wrong with the runs URL. */
  readRuns: () => Promise<Runs | string>
}

type Runs = Record<string, number>

/** Finished handler runs of a delivery id; undefined without --runs-url. */
type RunsOf = (id: string) => number | undefined

/**
 * A check sends its deliveries and returns the judge of its rows, called once every delivery was
 * answered, so a receiver that answers first and works later has caught up when runs are counted.
 */
type Check = (doctor: Doctor, valid: { signed: SignedWebhook; answer: Answer }) => Promise<Judge>

/** Turns a check's answers into its rows, given the run counts. */
type Judge = (runsOf: RunsOf) => Row[]

// Non-ASCII written as \u escapes, as a sender may write it: JSON.parse + JSON.stringify turns
// them into UTF-8, so a receiver that verifies a re-serialized body fails on this one.
const ESCAPED_TEXT = 'Caf\\u00e9 para dos \\ud83c\\udf5d \\u2014 raw bytes'
const RUNS_SHAPE = 'it must answer GET with 200 and JSON {"runs": {"<delivery id>": <times the handler finished>}}'

export const doctor = defineCommand(
  {
    name: 'doctor',
    summary: "check a live receiver against the service's delivery rules (for CI)",
    usage: ['<url> [options]'],
    positionals: ['<url>'],
    description: `Checks a live receiver against the service's delivery rules and prints a pass/fail table with a
fix for each failure. Point it at your own receiver (a local or staging one: it runs your
handler on sample events). Exits 1 on any failure, so it can gate CI. For a receiver of many
endpoints (one secret per tenant), point it at one tenant's URL with that tenant's secret, and
give another tenant's secret with --other-secret-env (or -file): it must be refused there.
When the valid delivery is not accepted (or is answered "ignored": no handler ran), the checks
built on it are shown as "not run: fix #1 first" and row 1 names the one cause.

${CHECK_LIST.map(([what, { text }, note]) => `  ${what.length > 34 ? `${what}\n${' '.repeat(38)}` : what.padEnd(36)}-> ${text} (${note})`).join('\n')}`,
    flags: {
      'runs-url': { type: 'string', value: 'URL', help: 'GET URL returns {"runs": {"<delivery id>": <times the handler finished>}}:\nenables the checks that the handler ran before the answer, and once' },
      'allow-v1': { type: 'boolean', help: 'the receiver accepts v1-only deliveries on purpose (allowV1: true)' },
      concurrency: { type: 'string', value: 'N', help: 'copies sent at once in the concurrency check (default 5, at most 20)' },
      timeout: { type: 'string', value: 'MS', help: "per request (default 10000, the service's limit)" },
      ...SECRET_FLAGS,
      ...OTHER_SECRET_FLAGS,
    },
    examples: [
      'npx svc-webhooks doctor http://127.0.0.1:3000/webhooks/svc --runs-url http://127.0.0.1:3000/runs',
      'npx svc-webhooks doctor https://staging.example.com/tenants/acme/webhooks --secret-env ACME_SECRET --other-secret-env GLOBEX_SECRET',
    ],
    exitCodes: '0 every check passed, 1 a check failed, 2 usage error.',
  },
  async ({ values, positionals }, io) => {
    const url = httpUrl(positionals[0], 'the receiver URL (svc-webhooks doctor <url>)')
    const runsUrl = values['runs-url'] === undefined ? undefined : httpUrl(values['runs-url'], '--runs-url')
    const timeoutMs = integer(values.timeout, '--timeout', SENDER_TIMEOUT_MS)
    const secret = signingSecret(values, io)
    const other = otherSigningSecret(values, io)
    if (other?.secret === secret) {
      throw new UsageError(`the secret from ${other.source} (--other-secret) is this endpoint's own secret: give the secret of another endpoint (tenant) of the same receiver.`)
    }
    const answers: Answer[] = []
    const doctor: Doctor = {
      allowV1: values['allow-v1'] ?? false,
      otherSecret: other?.secret,
      concurrency: Math.min(integer(values.concurrency, '--concurrency', 5, { min: 2 }), 20),
      runsUrl,
      sign: (options = {}) => signWebhook({ secret, event: sampleEvent('message.received'), ...options }),
      async deliver(signed, body) {
        const answer = await post(url, body === undefined ? signed : { ...signed, rawBody: new TextEncoder().encode(body) }, timeoutMs)
        answers.push(answer)
        return answer
      },
      readRuns: () => (runsUrl ? readRuns(runsUrl, timeoutMs) : Promise.resolve('no --runs-url')),
    }
    if (runsUrl) {
      // Before anything is sent: a runs URL that cannot be read would fail every run-count row.
      const runs = await doctor.readRuns()
      if (typeof runs === 'string') throw new UsageError(`--runs-url ${runsUrl.href}: ${runs}. Fix the URL, or leave out --runs-url to check statuses only.`)
    }

    const otherLine = other ? `\n${OTHER_TENANT} from ${other.source}: must be refused at this URL` : ''
    io.out(`svc-webhooks doctor ${url.href}\n${runsUrl ? `runs from ${runsUrl.href}` : 'no --runs-url: run counts are not checked'}${otherLine}\n\n`)
    const signed = await doctor.sign()
    const valid = { signed, answer: await doctor.deliver(signed) }
    const validRow = validDeliveryRow(valid.answer)
    if (valid.answer.error !== undefined) return finish(io, [validRow], `stopped: ${url.href} did not answer (${valid.answer.error.code}).`)
    // A body parsed before the middleware, or no secret for this URL, fails every request before its signature is read: each row would say it again.
    const code = answerCode(valid.answer.body)
    const stop = code === undefined || meets(valid.answer, ACCEPTED) ? undefined : STOPS[code]
    if (stop !== undefined) return finish(io, [validRow], `stopped: ${stop(valid.answer.status)}`)

    // The checks that build on a valid delivery being accepted (or its handler running) are not
    // run when it was not: they would fail for the same reason and each name a wrong cause.
    const missing: Precondition | undefined = !meets(valid.answer, ACCEPTED) ? 'accepted' : answeredIgnored(valid.answer.body) ? 'handled' : undefined
    const judges = []
    for (const step of STEPS) {
      const skip = missing !== undefined && step.needs !== undefined && (missing === 'accepted' || step.needs === 'handled')
      judges.push(skip ? notRun(step.rows(doctor)) : await step.check(doctor, valid))
    }
    const runs = await doctor.readRuns()
    const rows = [validRow, ...judges.flatMap((judge) => judge((id) => (typeof runs === 'string' ? undefined : (runs[id] ?? 0))))]
    if (runsUrl && typeof runs === 'string') rows.push({ check: 'run counts', expected: 'readable', got: 'unreadable', ok: false, fix: runs })
    const slowest = Math.round(Math.max(...answers.map((a) => a.ms)))
    const limit = Math.min(timeoutMs, SENDER_TIMEOUT_MS)
    rows.push({
      check: `every answer within ${limit / 1000} s`,
      expected: `< ${limit} ms`,
      got: `slowest ${slowest} ms`,
      ok: slowest < limit && answers.every((a) => a.error === undefined),
      fix: 'the service gives up after 10 s and counts a failure: answer within 10 s, moving slow work after a durable write (a queue).',
    })
    return finish(io, rows)
  },
)

// The checks, in the order they send.

/** What a check builds on: the valid delivery accepted (2xx), or also its handler run (not `ignored`). */
type Precondition = 'accepted' | 'handled'

/** A check, what it needs of the valid delivery, and the rows it shows (name, expected) when it is not run. */
interface Step {
  check: Check
  needs?: Precondition
  rows: (doctor: Doctor) => [string, string][]
}

/** The judge of rows that were not run: each says to fix row 1 first. */
function notRun(rows: [string, string][]): Judge {
  return () => rows.map(([check, expected]) => ({ check, expected, got: 'not run: fix #1 first', ok: false, notRun: true }))
}

/** The first delivery: correctly signed, of the one event type every receiver handles. */
function validDeliveryRow(answer: Answer): Row {
  const row = acceptedRow('valid delivery', answer, ACCEPTED, 'a correctly signed delivery was not accepted', refusedValid(answer))
  if (!row.ok || !answeredIgnored(answer.body)) return row
  // 2xx, but nothing ran: the sender is satisfied and the message is lost to the application.
  const { cause, fix } = noHandler('message.received')
  return { ...row, ok: false, fix: `${cause} Fix: ${fix}` }
}

/** The fix for a valid delivery refused 400/401: its body survives re-serialization, so a 401 is the secret. */
function refusedValid(answer: Answer): string | undefined {
  if (answer.status !== 401) return undefined
  return `the receiver refused a correctly signed delivery (401${answerCode(answer.body) === undefined ? '' : ` ${answerCode(answer.body)}`}): ${OTHER_SECRET.cause}. Fix: ${OTHER_SECRET.fix}`
}

/** The handler had finished when the 2xx came: the service never retries a 2xx. */
const handlerFinishedFirst: Check = async (doctor, { signed, answer }) => {
  // A 202 (accepted into a durable inbox) promises a later run, not a finished one.
  if (!doctor.runsUrl || !meets(answer, ACCEPTED) || answer.status === ANSWERS.accepted.status) return () => []
  const runs = await doctor.readRuns()
  const n = typeof runs === 'string' ? undefined : (runs[signed.id] ?? 0)
  let fix = typeof runs === 'string' ? runs : `the runs URL counts ${n} runs for a delivery sent once: it must count finished handler runs per delivery id.`
  if (n === 0) {
    fix = 'the receiver answered 2xx before its handler finished: the service never retries a 2xx, so if the process dies now the delivery is lost. Run the handler (or write the event to a durable queue) first, then answer.'
  }
  return () => [{ check: CHECK.handlerFirst, expected: '1 run when the 2xx arrives', got: n === undefined ? 'runs URL unreadable' : runCount(n), ok: n === 1, fix }]
}

/** The same delivery again, as a retry or manual resend: same id and bytes, new timestamp. */
const resend: Check = async (doctor, { signed }) => {
  const answer = await doctor.deliver(await doctor.sign({ body: signed.rawBody, id: signed.id, timestamp: signed.timestamp + 1 }))
  return (runsOf) => {
    const row = acceptedRow(CHECK.resend, answer, DUPLICATE, 'a resend or retry of a processed delivery must be answered 2xx (duplicate)')
    if (answer.status === 409) row.fix = 'answered 409 to a duplicate: the service treats 409 as a permanent refusal. Answer 2xx for an id already processed (marked duplicate), without running the handler.'
    const runs = runsOf(signed.id)
    if (runs === undefined) return [row]
    row.expected += ', still 1 run'
    row.got += `, ${runCount(runs)}`
    if (runs > 1) {
      row.ok = false
      row.fix = 'the handler ran again for a delivery id it had already processed: deduplicate on svc-webhook-id (after v2 verification) with claim -> run -> complete in a shared store, and answer 2xx duplicate.'
    }
    return [row]
  }
}

/** A body that changes when parsed and re-serialized: only verifying the raw bytes accepts it. */
const rawBytes: Check = async (doctor) => {
  const event = sampleEvent('message.received')
  const answer = await doctor.deliver(await doctor.sign({ body: serializeEvent(event).replace(JSON.stringify(event.message.text), `"${ESCAPED_TEXT}"`) }))
  const refused = `a correctly signed body with \\u escapes was refused: the receiver verifies a re-serialized body (JSON.parse then JSON.stringify), not the raw bytes. Fix: ${RAW_BYTES}.`
  return () => [acceptedRow(CHECK.rawBytes, answer, ACCEPTED, 'a correctly signed body with \\u escapes was not accepted', refused)]
}

/** With --allow-v1, a valid v1-only delivery must be accepted (without it, it is one of the refusals). */
const v1WhenAllowed: Check = async (doctor) => {
  if (!doctor.allowV1) return () => []
  const answer = await doctor.deliver(await doctor.sign({ schemes: ['v1'] }))
  return () => [acceptedRow(CHECK.v1Allowed, answer, ACCEPTED, 'the receiver is said to accept v1 (--allow-v1) but refused a valid v1 delivery')]
}

/** An event type this receiver has never heard of: the catalog grows. */
const unknownEventType: Check = async (doctor) => {
  const answer = await doctor.deliver(await doctor.sign({ event: { event: 'doctor.unknown_event', id: randomUUID() } }))
  const why = 'an event type without a handler must be answered 2xx and ignored: the catalog grows, and a 4xx drops those deliveries, a 5xx makes them fail until the endpoint is disabled'
  return () => [acceptedRow(CHECK.unknownType, answer, IGNORED, why, `refused an event type it has no handler for; ${why}.`)]
}

/** Deliveries that must be refused permanently, without running the handler. */
const refusals: Check = async (doctor) => {
  const sent: [Refusal, SignedWebhook, Answer][] = []
  for (const refusal of REFUSALS) {
    if (refusal.skip?.(doctor)) continue
    const signed = await doctor.sign(refusal.sign(doctor))
    sent.push([refusal, signed, await doctor.deliver(signed, refusal.tamper ? signed.body.replace('"text":"', '"text":"tampered ') : undefined)])
  }
  return (runsOf) =>
    sent.map(([{ check, code, why, whenAccepted }, signed, answer]) => {
      const runs = runsOf(signed.id)
      const expectation = expected(code)
      const reading = answer.error === undefined ? readingOf(answer.status) : undefined
      const answered = `answered ${answer.status}${answerCode(answer.body) === undefined ? '' : ` ${answerCode(answer.body)}`}`
      let fix: string | undefined
      if (answer.error !== undefined) fix = `${answer.error.meaning} Refuse bad deliveries quickly, with 401.`
      else if (reading === 'delivered') fix = `accepted a delivery it must refuse: ${why}. ${whenAccepted ?? 'Verify with verifyWebhook (or the svc-webhooks middleware) before anything else and answer 401.'}`
      else if (reading === 'retried') fix = `${answered}, which the service retries: a bad delivery would come back again and again and count toward disabling the endpoint. Answer 401 (400 for malformed headers).`
      else if (!meets(answer, expectation)) fix = `${answered}; answer 401.`
      else if (runs !== undefined && runs > 0) fix = `${answered} but the handler ran: verify before running the handler.`
      return {
        check,
        expected: runs === undefined ? expectation.text : `${expectation.text}, no run`,
        got: got(answer) + (runs === undefined ? '' : `, ${runCount(runs)}`),
        ok: meets(answer, expectation) && !runs,
        fix,
      }
    })
}

/** Copies of one delivery at once, as overlapping retries arrive: never a permanent refusal, at most one run. */
const concurrentDuplicates: Check = async (doctor) => {
  const first = await doctor.sign()
  const copies = await Promise.all(Array.from({ length: doctor.concurrency }, (_, i) => doctor.sign({ body: first.rawBody, id: first.id, timestamp: first.timestamp + (i % 3) })))
  const answers = await Promise.all(copies.map((copy) => doctor.deliver(copy)))
  return (runsOf) => {
    const permanent = answers.filter((a) => a.error === undefined && !meets(a, CONCURRENT))
    const runs = runsOf(first.id)
    let fix = 'a copy got no answer within the time limit.'
    if (permanent.length > 0) {
      fix = `answered ${summarize(permanent.map((a) => String(a.status)))} while the same id was being processed: that is permanent to the service, which drops the delivery if the first attempt then fails. Answer 429 or 503 with Retry-After while it is in flight, 2xx once done.`
    } else if (runs !== undefined && runs > 1) {
      fix = 'the handler ran more than once for one delivery id: claim the id atomically before running (SET NX in Redis, INSERT ... ON CONFLICT DO NOTHING), not check-then-run.'
    }
    return [
      {
        check: CHECK.concurrent(doctor.concurrency),
        expected: `${CONCURRENT.text} only${runs === undefined ? '' : ', at most 1 run'}`,
        got: summarize(answers.map((a) => (a.error !== undefined ? 'no answer' : String(a.status)))) + (runs === undefined ? '' : `, ${runCount(runs)}`),
        ok: permanent.length === 0 && answers.every((a) => a.error === undefined) && (runs === undefined || runs <= 1),
        fix,
      },
    ]
  }
}

/** The checks in the order they send. Refusals build on nothing: a receiver that refuses everything still refuses forgeries. */
const STEPS: Step[] = [
  { check: handlerFinishedFirst, needs: 'handled', rows: (d) => (d.runsUrl ? [[CHECK.handlerFirst, '1 run when the 2xx arrives']] : []) },
  { check: resend, needs: 'handled', rows: (d) => [[CHECK.resend, DUPLICATE.text + (d.runsUrl ? ', still 1 run' : '')]] },
  { check: rawBytes, needs: 'accepted', rows: () => [[CHECK.rawBytes, ACCEPTED.text]] },
  { check: v1WhenAllowed, needs: 'accepted', rows: (d) => (d.allowV1 ? [[CHECK.v1Allowed, ACCEPTED.text]] : []) },
  { check: unknownEventType, needs: 'accepted', rows: () => [[CHECK.unknownType, IGNORED.text]] },
  { check: refusals, rows: () => [] },
  { check: concurrentDuplicates, needs: 'handled', rows: (d) => [[CHECK.concurrent(d.concurrency), `${CONCURRENT.text} only${d.runsUrl ? ', at most 1 run' : ''}`]] },
]

// Judging and printing.

function meets(answer: Answer, expectation: Expected): boolean {
  return answer.error === undefined && expectation.readings.has(readingOf(answer.status))
}

/** The status and the answer's code, or why no answer came. */
function got(answer: Answer): string {
  if (answer.error !== undefined) return `no answer (${answer.error.code})`
  const code = answerCode(answer.body) ?? (answeredIgnored(answer.body) ? 'ignored' : undefined)
  return `${answer.status}${code === undefined ? '' : ` ${code}`} in ${Math.round(answer.ms)} ms`
}

/** A row whose delivery must be accepted. `problem` says what failing means; `whenRefused` is the fix for a 400 or 401. */
function acceptedRow(check: string, answer: Answer, expectation: Expected, problem: string, whenRefused?: string): Row {
  const row = { check, expected: expectation.text, got: got(answer), ok: meets(answer, expectation) }
  const { status, error } = answer
  const code = answerCode(answer.body)
  if (error !== undefined) return { ...row, fix: error.meaning }
  if ((status === 400 || status === 401) && whenRefused !== undefined) return { ...row, fix: whenRefused }
  if (code !== undefined) return { ...row, fix: `${problem}: the receiver answered ${status} ${code}, ${FIXES[code].cause}. Fix: ${FIXES[code].fix}` }
  if (status === 404 || status === 405) return { ...row, fix: `${status}: nothing accepts POST at this URL; check the path and method the route is mounted on.` }
  if (readingOf(status) === 'redirect') return { ...row, fix: `${status}: the service does not follow redirects; give it the final URL.` }
  if (status === 400 || status === 401) {
    return { ...row, fix: `${problem}: the receiver refused it (${status}). Check it uses the same secret as this doctor run, and verifies the raw request bytes.` }
  }
  if (readingOf(status) === 'retried') return { ...row, fix: `${problem}: ${status} makes the service retry. Check the receiver's logs (handler error? store unreachable?).` }
  return { ...row, fix: `${problem}.` }
}

/** The run counts from the runs URL, or what is wrong with it (what it answered, never a JSON parser's complaint). */
async function readRuns(runsUrl: URL, timeoutMs: number): Promise<Runs | string> {
  let res: Response
  try {
    res = await fetch(runsUrl, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) })
  } catch (error) {
    const why = noAnswer(error, runsUrl, timeoutMs)
    return `the runs URL did not answer (${why.code}): ${why.meaning}`
  }
  const text = await res.text()
  if (!res.ok) return `the runs URL answered ${res.status}; ${RUNS_SHAPE}`
  let runs: unknown
  try {
    runs = (JSON.parse(text) as { runs?: unknown } | null)?.runs
  } catch {
    return `the runs URL answered ${res.status} with ${res.headers.get('content-type') ?? 'no content type'}, not JSON; ${RUNS_SHAPE}`
  }
  return typeof runs === 'object' && runs !== null && !Array.isArray(runs) ? (runs as Runs) : `the runs URL answered JSON without a "runs" object; ${RUNS_SHAPE}`
}

function runCount(n: number): string {
  return `${n} run${n === 1 ? '' : 's'}`
}

/** `200 x3, 429 x2` */
function summarize(statuses: string[]): string {
  const counts = new Map<string, number>()
  for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1)
  return [...counts].map(([s, n]) => (n === 1 ? s : `${s} x${n}`)).join(', ')
}

function finish(io: Io, rows: Row[], note?: string): number {
  const width = Math.max(...rows.map((r) => r.check.length), 5)
  const expectedWidth = Math.max(...rows.map((r) => r.expected.length), 8)
  const lines = [` #  result  ${'check'.padEnd(width)}  ${'expected'.padEnd(expectedWidth)}  got`]
  rows.forEach((r, i) => lines.push(`${String(i + 1).padStart(2)}  ${r.notRun ? '--  ' : r.ok ? 'PASS' : 'FAIL'}    ${r.check.padEnd(width)}  ${r.expected.padEnd(expectedWidth)}  ${r.got}`))
  const failed = rows.filter((r) => !r.ok && !r.notRun)
  const skipped = rows.filter((r) => r.notRun).length
  lines.push('', `${rows.length - failed.length - skipped} passed, ${failed.length} failed${skipped === 0 ? '' : `, ${skipped} not run`}`)
  if (note) lines.push(note)
  if (failed.length > 0) {
    lines.push('', 'How to fix:')
    rows.forEach((r, i) => {
      if (!r.ok && !r.notRun) lines.push(`${String(i + 1).padStart(2)}  ${r.check}: ${r.fix ?? 'see the expected answer above.'}`)
    })
  }
  io.out(`${lines.join('\n')}\n`)
  return failed.length === 0 && skipped === 0 ? EXIT.ok : EXIT.failed
}
