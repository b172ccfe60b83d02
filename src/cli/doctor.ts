/**
 * `svc-webhooks doctor <url>`: a conformance check of a live receiver against the sender's retry
 * rules (spec/service-api.md §6.3) and the answers table of DESIGN.md. Sends a small, fixed set of
 * signed and deliberately bad deliveries, each with a timeout, and prints a pass/fail table with
 * a fix for each failure. With `--runs-url` it also checks how often the handler ran.
 */
import { randomUUID } from 'node:crypto'
import { sampleEvent, serializeEvent, signWebhook, type SignedWebhook } from '../testing.js'
import {
  EXIT,
  HELP_OPTION,
  httpUrl,
  integer,
  parse,
  post,
  SECRET_HELP,
  SECRET_OPTIONS,
  SENDER_TIMEOUT_MS,
  signingSecret,
  type Answer,
  type Io,
} from './shared.js'

export const DOCTOR_HELP = `Usage: svc-webhooks doctor <url> [options]

Checks a live receiver against the service's delivery rules and prints a pass/fail table with a
fix for each failure. Point it at your own receiver (a local or staging one: it runs your
handler on sample events). Exits 1 on any failure, so it can gate CI.

  valid delivery                      -> 2xx within 10 s
  resend (same id, new timestamp)     -> 2xx, handler not run again
  body with \\u escapes (raw bytes)    -> 2xx (fails when the body is re-serialized before verifying)
  tampered body, wrong secret, stale or future timestamp, v1-only, unsigned
                                      -> 4xx, not 429 (a 2xx accepts a forgery, a 5xx or 429 is retried)
  concurrent duplicates               -> 2xx, 429 or 5xx only (never a permanent 4xx), one run
  unknown event type                  -> 2xx (the catalog grows)

Options:
  --runs-url URL       GET URL returns {"runs": {"<delivery id>": <times the handler finished>}}:
                       enables the checks that the handler ran before the answer, once
  --allow-v1           the receiver accepts v1-only deliveries on purpose (allowV1: true)
  --concurrency N      copies sent at once in the concurrency check (default 5, at most 20)
  --timeout MS         per request (default 10000, the service's limit)

${SECRET_HELP}

Exit codes: 0 every check passed, 1 a check failed, 2 usage error.`

/** One row of the table. */
interface Row {
  check: string
  expected: string
  got: string
  ok: boolean
  fix?: string
}

type Runs = Record<string, number>

const STALE_SECONDS = 3600
// Non-ASCII written as \u escapes, as a sender may write it: JSON.parse + JSON.stringify turns
// them into UTF-8, so a receiver that verifies a re-serialized body fails on this one.
const ESCAPED_TEXT = 'Caf\\u00e9 para dos \\ud83c\\udf5d \\u2014 raw bytes'

/** Runs `doctor`; returns the exit code. */
export async function doctorCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse({
    args: argv,
    options: {
      ...HELP_OPTION,
      ...SECRET_OPTIONS,
      'runs-url': { type: 'string' },
      'allow-v1': { type: 'boolean' },
      concurrency: { type: 'string' },
      timeout: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  })
  if (values.help) {
    io.out(`${DOCTOR_HELP}\n`)
    return EXIT.ok
  }
  const url = httpUrl(positionals[0], 'the receiver URL (svc-webhooks doctor <url>)')
  const runsUrl = values['runs-url'] === undefined ? undefined : httpUrl(values['runs-url'], '--runs-url')
  const timeoutMs = integer(values.timeout, '--timeout', SENDER_TIMEOUT_MS)
  const concurrency = Math.min(integer(values.concurrency, '--concurrency', 5, { min: 2 }), 20)
  const allowV1 = values['allow-v1'] ?? false
  const secret = signingSecret(values, io)

  io.out(`svc-webhooks doctor ${url.href}\n${runsUrl ? `runs from ${runsUrl.href}` : 'no --runs-url: run counts are not checked'}\n\n`)
  const rows: Row[] = []
  const times: number[] = []
  const send = async (signed: SignedWebhook): Promise<Answer> => {
    const answer = await post(url, signed, timeoutMs)
    times.push(answer.ms)
    return answer
  }
  const sign = (options: Partial<Parameters<typeof signWebhook>[0]> = {}) =>
    signWebhook({ secret, event: sampleEvent('message.received'), ...options })
  const readRuns = async (): Promise<Runs | string> => {
    if (!runsUrl) return 'no runs URL'
    try {
      const res = await fetch(runsUrl, { signal: AbortSignal.timeout(timeoutMs) })
      const json = (await res.json()) as { runs?: unknown }
      if (!res.ok || typeof json.runs !== 'object' || json.runs === null) return `runs URL answered ${res.status} without {"runs": {...}}`
      return json.runs as Runs
    } catch (error) {
      return `runs URL unreadable: ${(error as Error).message}`
    }
  }

  // 1. A valid delivery, and whether the handler had finished when the 2xx came.
  const valid = await sign()
  const first = await send(valid)
  rows.push(accepted('valid delivery', first, 'a correctly signed delivery was not accepted'))
  if (first.error !== undefined) return finish(io, rows, `stopped: ${url.href} did not answer (${first.error}).`)
  if (runsUrl && is2xx(first)) {
    const runs = await readRuns()
    const n = typeof runs === 'string' ? undefined : (runs[valid.id] ?? 0)
    rows.push({
      check: 'handler finished before the 2xx',
      expected: '1 run when the 2xx arrives',
      got: n === undefined ? (runs as string) : `${n} run${n === 1 ? '' : 's'}`,
      ok: n === 1,
      fix:
        n === 0
          ? 'the receiver answered 2xx before its handler finished: the service never retries a 2xx, so if the process dies now the delivery is lost. Run the handler (or write the event to a durable queue) first, then answer.'
          : 'the runs URL must return {"runs": {"<delivery id>": <finished runs>}} for the ids the receiver processed.',
    })
  }

  // 2. A resend of the same delivery: same id and bytes, new timestamp.
  const resend = await sign({ body: valid.rawBody, id: valid.id, timestamp: valid.timestamp + 1 })
  const second = await send(resend)

  // 3. Raw bytes: a body that changes when parsed and re-serialized.
  const escapedBody = serializeEvent(sampleEvent('message.received')).replace(
    JSON.stringify(sampleEvent('message.received').message.text),
    `"${ESCAPED_TEXT}"`,
  )
  const escaped = await sign({ body: escapedBody })
  const raw = await send(escaped)
  rows.push(
    accepted(
      'raw bytes: body with \\u escapes',
      raw,
      'a correctly signed body with \\u escapes was not accepted',
      'a correctly signed body with \\u escapes was refused: the receiver verifies a re-serialized body (JSON.parse then JSON.stringify), not the raw bytes. Mount the webhook route before express.json() (or use express.raw({ type: "*/*" }) / await request.arrayBuffer()) and verify those bytes.',
    ),
  )

  // 4. Deliveries that must be refused permanently.
  const refusals: [string, SignedWebhook, Answer, string][] = []
  const refuse = async (check: string, signed: SignedWebhook, why: string, body?: string) => {
    const answer = await send(body === undefined ? signed : { ...signed, rawBody: new TextEncoder().encode(body) })
    refusals.push([check, signed, answer, why])
  }
  const tampered = await sign()
  await refuse('tampered body', tampered, 'it does not check the signature against the body it received', tampered.body.replace('"text":"', '"text":"tampered '))
  await refuse('wrong secret', await sign({ secret: `svc_whsec_${randomUUID().replace(/-/g, '')}` }), 'it does not verify the signature with the endpoint secret')
  const nowSeconds = Math.floor(Date.now() / 1000)
  await refuse(`stale timestamp (${STALE_SECONDS} s old)`, await sign({ timestamp: nowSeconds - STALE_SECONDS }), 'it ignores the signed timestamp, so a captured delivery can be replayed forever; refuse timestamps more than 300 s away')
  await refuse(`future timestamp (${STALE_SECONDS} s ahead)`, await sign({ timestamp: nowSeconds + STALE_SECONDS }), 'it checks the timestamp in one direction only; refuse timestamps more than 300 s away either way')
  const v1Only = await sign({ schemes: ['v1'] })
  if (allowV1) rows.push(accepted('v1-only (--allow-v1)', await send(v1Only), 'the receiver is said to accept v1 (--allow-v1) but refused a valid v1 delivery'))
  else await refuse('v1-only signature', v1Only, 'it accepts the legacy v1 signature, which does not cover the delivery id (rerun with --allow-v1 if you opted in for a legacy sender)')
  await refuse('no signature', await sign({ schemes: [] }), 'it accepts unsigned requests: anyone who knows the URL can post events')

  // 5. Concurrent copies of one delivery, as overlapping retries arrive.
  const dup = await sign()
  const dupId = dup.id
  const signedCopies = await Promise.all(
    Array.from({ length: concurrency }, (_, i) => sign({ body: dup.rawBody, id: dup.id, timestamp: dup.timestamp + (i % 3) })),
  )
  const dupAnswers = await Promise.all(signedCopies.map(send))

  // 6. An event type this receiver has never heard of.
  const unknown = await sign({ event: { event: 'doctor.unknown_event', id: randomUUID() } })
  rows.push(accepted('unknown event type', await send(unknown), 'an event type without a handler must be answered 2xx and ignored: the catalog grows, and a 4xx drops those deliveries, a 5xx makes them fail until the endpoint is disabled.'))

  // Run counts, read once after everything has been answered.
  const runs = await readRuns()
  const runsOf = (id: string): number | undefined => (typeof runs === 'string' ? undefined : (runs[id] ?? 0))

  const resendRuns = runsOf(valid.id)
  const resendRow = accepted('resend (same id, new timestamp)', second, 'a resend or retry of a processed delivery must be answered 2xx (duplicate)')
  if (second.status === 409) resendRow.fix = 'answered 409 to a duplicate: the service treats 409 as a permanent refusal. Answer 2xx for an id already processed (marked duplicate), without running the handler.'
  if (resendRuns !== undefined) {
    resendRow.expected = '2xx, still 1 run'
    resendRow.got += `, ${resendRuns} run${resendRuns === 1 ? '' : 's'}`
    if (resendRuns > 1) {
      resendRow.ok = false
      resendRow.fix = 'the handler ran again for a delivery id it had already processed: deduplicate on svc-webhook-id (after v2 verification) with claim -> run -> complete in a shared store, and answer 2xx duplicate.'
    }
  }
  rows.splice(rows.findIndex((r) => r.check === 'raw bytes: body with \\u escapes'), 0, resendRow)

  for (const [check, signed, answer, why] of refusals) rows.push(refused(check, answer, why, runsOf(signed.id)))

  const statuses = dupAnswers.map((a) => (a.error !== undefined ? 'no answer' : String(a.status)))
  const permanent = dupAnswers.filter((a) => a.error === undefined && !(is2xx(a) || a.status === 429 || a.status >= 500))
  const dupRuns = runsOf(dupId)
  rows.push({
    check: `${concurrency} concurrent duplicates`,
    expected: `2xx/429/5xx only${dupRuns === undefined ? '' : ', at most 1 run'}`,
    got: `${summarize(statuses)}${dupRuns === undefined ? '' : `, ${dupRuns} run${dupRuns === 1 ? '' : 's'}`}`,
    ok: permanent.length === 0 && dupAnswers.every((a) => a.error === undefined) && (dupRuns === undefined || dupRuns <= 1),
    fix:
      permanent.length > 0
        ? `answered ${summarize(permanent.map((a) => String(a.status)))} while the same id was being processed: that is permanent to the service, which drops the delivery if the first attempt then fails. Answer 429 or 503 with Retry-After while it is in flight, 2xx once done.`
        : dupRuns !== undefined && dupRuns > 1
          ? 'the handler ran more than once for one delivery id: claim the id atomically before running (SET NX in Redis, INSERT ... ON CONFLICT DO NOTHING), not check-then-run.'
          : 'a copy got no answer within the time limit.',
  })
  rows.push(withinTime(rows, times, timeoutMs))
  return finish(io, rows)
}

function is2xx(answer: Answer): boolean {
  return answer.error === undefined && answer.status >= 200 && answer.status < 300
}

function got(answer: Answer): string {
  return answer.error !== undefined ? answer.error : `${answer.status} in ${Math.round(answer.ms)} ms`
}

/** A row that expects 2xx. */
function accepted(check: string, answer: Answer, problem: string, refusedFix?: string): Row {
  let fix = problem
  if (answer.error !== undefined) fix = `no answer: the service gives up after 10 s and retries. Answer within 10 s; move slow work after a durable write (a queue).`
  else if (answer.status === 404 || answer.status === 405) fix = `${answer.status}: nothing accepts POST at this URL; check the path and method the route is mounted on.`
  else if (answer.status >= 300 && answer.status < 400) fix = `${answer.status}: the service does not follow redirects; give it the final URL.`
  else if ((answer.status === 401 || answer.status === 400) && refusedFix !== undefined) fix = refusedFix
  else if (answer.status === 401 || answer.status === 400) fix = `${problem}. The receiver refused it (${answer.status}): check it uses the same secret as this doctor run, and verifies the raw request bytes.`
  else if (answer.status === 429 || answer.status >= 500) fix = `${problem}. ${answer.status} makes the service retry; check the receiver's logs (handler error? store unreachable?).`
  return { check, expected: '2xx', got: got(answer), ok: is2xx(answer), fix }
}

/** A row that expects a permanent refusal: 4xx, not 429, and the handler not run. */
function refused(check: string, answer: Answer, why: string, runs: number | undefined): Row {
  const permanent = answer.error === undefined && answer.status >= 400 && answer.status < 500 && answer.status !== 429
  let fix: string | undefined
  if (answer.error !== undefined) fix = 'no answer: refuse bad deliveries quickly with 401.'
  else if (is2xx(answer)) fix = `accepted a delivery it must refuse: ${why}. Verify with verifyWebhook (or the svc-webhooks middleware) before anything else and answer 401.`
  else if (answer.status === 429 || answer.status >= 500) fix = `answered ${answer.status}, which the service retries: a bad delivery would come back again and again and count toward disabling the endpoint. Answer 401 (400 for malformed headers).`
  else if (!permanent) fix = `answered ${answer.status}; answer 401.`
  else if (runs !== undefined && runs > 0) fix = `answered ${answer.status} but the handler ran: verify before running the handler.`
  return {
    check,
    expected: runs === undefined ? '4xx, not 429' : '4xx, not 429, no run',
    got: got(answer) + (runs === undefined ? '' : `, ${runs} run${runs === 1 ? '' : 's'}`),
    ok: permanent && (runs === undefined || runs === 0),
    fix,
  }
}

function withinTime(rows: Row[], times: number[], timeoutMs: number): Row {
  const slowest = Math.round(Math.max(...times))
  const limit = Math.min(timeoutMs, SENDER_TIMEOUT_MS)
  const ok = slowest < limit && rows.every((r) => !r.got.startsWith('no answer'))
  return {
    check: `every answer within ${limit / 1000} s`,
    expected: `< ${limit} ms`,
    got: `slowest ${slowest} ms`,
    ok,
    fix: 'the service gives up after 10 s and counts a failure: answer within 10 s, moving slow work after a durable write (a queue).',
  }
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
  rows.forEach((r, i) => lines.push(`${String(i + 1).padStart(2)}  ${r.ok ? 'PASS' : 'FAIL'}    ${r.check.padEnd(width)}  ${r.expected.padEnd(expectedWidth)}  ${r.got}`))
  const failed = rows.filter((r) => !r.ok)
  lines.push('', `${rows.length - failed.length} passed, ${failed.length} failed`)
  if (note) lines.push(note)
  if (failed.length > 0) {
    lines.push('', 'How to fix:')
    rows.forEach((r, i) => {
      if (!r.ok) lines.push(`${String(i + 1).padStart(2)}  ${r.check}: ${r.fix ?? 'see the expected answer above.'}`)
    })
  }
  io.out(`${lines.join('\n')}\n`)
  return failed.length === 0 ? EXIT.ok : EXIT.failed
}
