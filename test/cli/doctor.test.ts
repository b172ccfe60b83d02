/**
 * `svc-webhooks doctor` as users run it (the built bin, a child process) against live receivers on
 * 127.0.0.1: it passes the correct one and catches each broken one on the right row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ANSWERS, type AnswerName } from 'svc-webhooks'
import { runCli, startReceiver, type Receiver, type ReceiverKind } from '../support/broken-receivers.js'

const receivers = new Map<ReceiverKind, Receiver>()
const KINDS: ReceiverKind[] = [
  'correct',
  'conflict-on-duplicate',
  'reserializes-body',
  'ignores-timestamp',
  'accepts-anything',
  'answers-before-processing',
  'runs-duplicates',
  'rejects-unknown-events',
  'parses-json-first',
  'other-secret',
  'misspelled-on',
]

beforeAll(async () => {
  for (const kind of KINDS) receivers.set(kind, await startReceiver(kind))
})
afterAll(async () => {
  await Promise.all([...receivers.values()].map((r) => r.close()))
})

async function doctor(kind: ReceiverKind, extra: string[] = []) {
  const receiver = receivers.get(kind)!
  return runCli(['doctor', receiver.url, '--runs-url', receiver.runsUrl, ...extra])
}

/** A doubled period, as in "disabled..": not an ellipsis ("...", "{...}"). */
const DOUBLED_PERIOD = /(?<!\.)\.\.(?!\.)/

/** The table rows that failed, by check name. */
function failedRows(stdout: string): string[] {
  return [...stdout.matchAll(/^\s*\d+\s+FAIL\s+(.+?)\s{2,}/gm)].map((m) => m[1]!)
}

describe('svc-webhooks doctor', () => {
  it('passes a correct receiver (exit 0, every row PASS)', async () => {
    const { code, stdout, stderr } = await doctor('correct')
    expect(stderr).toBe('')
    expect(failedRows(stdout)).toEqual([])
    expect(stdout).toMatch(/^\s*\d+\s+PASS\s+handler finished before the 2xx/m)
    expect(stdout).toMatch(/^\s*\d+\s+PASS\s+5 concurrent duplicates\s.*, 1 run$/m)
    expect(stdout).toMatch(/\b13 passed, 0 failed\b/)
    expect(code).toBe(0)
    // Each forgery doctor sent left a line in the receiver's log, named by its code.
    const codes = new Set(receivers.get('correct')!.logged.flatMap((line) => /^svc-webhooks: \d{3} (\w+)/.exec(line)?.[1] ?? []))
    expect([...codes]).toEqual(expect.arrayContaining(['invalid_signature', 'timestamp_too_old', 'timestamp_in_future', 'v1_not_allowed', 'missing_signature']))
  })

  it('each row shows the code the answer carries, and the refusals expect what the answers table answers', async () => {
    const { stdout } = await doctor('correct')
    const refusals: [string, AnswerName][] = [
      ['tampered body', 'invalid_signature'],
      ['wrong secret', 'invalid_signature'],
      ['stale timestamp (3600 s old)', 'timestamp_too_old'],
      ['future timestamp (3600 s ahead)', 'timestamp_in_future'],
      ['v1-only signature', 'v1_not_allowed'],
      ['no signature', 'missing_signature'],
    ]
    for (const [check, name] of refusals) {
      const escaped = check.replace(/[()]/g, '\\$&')
      expect(stdout).toMatch(new RegExp(`PASS\\s+${escaped}\\s+4xx, not 429, no run\\s+${ANSWERS[name].status} ${name} in \\d+ ms, 0 runs$`, 'm'))
    }
  })

  it('passes a correct receiver without a runs URL (status checks only)', async () => {
    const { code, stdout } = await runCli(['doctor', receivers.get('correct')!.url])
    expect(stdout).toContain('no --runs-url')
    expect(stdout).not.toContain('handler finished before the 2xx')
    expect(code).toBe(0)
  })

  const cases: [ReceiverKind, string[], RegExp][] = [
    ['conflict-on-duplicate', ['resend (same id, new timestamp)', '5 concurrent duplicates'], /answered 409 to a duplicate/],
    ['reserializes-body', ['raw bytes: body with \\u escapes'], /verifies a re-serialized body/],
    ['ignores-timestamp', ['stale timestamp (3600 s old)', 'future timestamp (3600 s ahead)'], /ignores the signed timestamp/],
    [
      'accepts-anything',
      ['tampered body', 'wrong secret', 'stale timestamp (3600 s old)', 'future timestamp (3600 s ahead)', 'v1-only signature', 'no signature', 'resend (same id, new timestamp)', '5 concurrent duplicates'],
      /accepts unsigned requests/,
    ],
    ['answers-before-processing', ['handler finished before the 2xx'], /answered 2xx before its handler finished/],
    ['runs-duplicates', ['resend (same id, new timestamp)', '5 concurrent duplicates'], /the handler ran again/],
    ['rejects-unknown-events', ['unknown event type'], /catalog grows/],
  ]
  it.each(cases)('catches the %s receiver on the right rows', async (kind, rows, fix) => {
    const { code, stdout } = await doctor(kind)
    expect(failedRows(stdout).sort()).toEqual([...rows].sort())
    expect(stdout).toMatch(fix)
    expect(stdout).toContain('How to fix:')
    expect(stdout).not.toMatch(DOUBLED_PERIOD)
    expect(code).toBe(1)
  })

  /** The table rows that were not run, by check name. */
  const notRunRows = (stdout: string) => [...stdout.matchAll(/^\s*\d+\s+--\s+(.+?)\s{2,}.*not run: fix #1 first$/gm)].map((m) => m[1]!)

  it('a receiver with another secret: one failure, named as the secret; the checks built on it say "not run: fix #1 first"', async () => {
    const { code, stdout } = await doctor('other-secret')
    expect(failedRows(stdout)).toEqual(['valid delivery'])
    expect(notRunRows(stdout)).toEqual(['handler finished before the 2xx', 'resend (same id, new timestamp)', 'raw bytes: body with \\u escapes', 'unknown event type', '5 concurrent duplicates'])
    expect(stdout).toMatch(/^7 passed, 1 failed, 5 not run$/m)
    expect(stdout).toMatch(/^ 1 {2}valid delivery: .*another secret than the one this command signs with/m)
    // The wrong causes each dependent row used to give.
    expect(stdout).not.toMatch(/re-serialized body instead|verifies a re-serialized body|no handler for|Answer 429 or 503/)
    expect(stdout).not.toMatch(DOUBLED_PERIOD)
    expect(code).toBe(1)
  })

  it('a misspelled `on` key: the valid delivery answered 200 ignored is named, and the handler checks are not run', async () => {
    const { code, stdout } = await doctor('misspelled-on')
    expect(failedRows(stdout)).toEqual(['valid delivery'])
    expect(stdout).toMatch(/^\s*1\s+FAIL\s+valid delivery\s+2xx\s+200 ignored in \d+ ms$/m)
    expect(stdout).toContain('valid delivery: no handler for message.received in `on`: misspelled key?')
    expect(notRunRows(stdout)).toEqual(['handler finished before the 2xx', 'resend (same id, new timestamp)', '5 concurrent duplicates'])
    // Checks that need only a verified delivery still run.
    expect(stdout).toMatch(/^\s*\d+\s+PASS\s+unknown event type/m)
    expect(stdout).not.toContain('answered 2xx before its handler finished')
    expect(code).toBe(1)
  })

  it('a wrong path (the framework\'s 404 page): the route is named, the rest not run', async () => {
    const receiver = receivers.get('correct')!
    const { code, stdout } = await runCli(['doctor', receiver.url.replace('/webhooks/svc', '/webhook/svc')])
    expect(failedRows(stdout)).toEqual(['valid delivery'])
    expect(stdout).toContain('valid delivery: 404: nothing accepts POST at this URL; check the path and method the route is mounted on.')
    expect(notRunRows(stdout)).toEqual(['resend (same id, new timestamp)', 'raw bytes: body with \\u escapes', 'unknown event type', '5 concurrent duplicates'])
    expect(code).toBe(1)
  })

  it('express.json() before webhooks(): reads body_already_parsed from the answer and names the fix once', async () => {
    const { code, stdout } = await doctor('parses-json-first')
    expect(failedRows(stdout)).toEqual(['valid delivery'])
    expect(stdout).toMatch(/^\s*1\s+FAIL\s+valid delivery\s+2xx\s+500 body_already_parsed in \d+ ms$/m)
    expect(stdout).toMatch(/^stopped: the receiver answers every delivery 500 body_already_parsed/m)
    expect(stdout.match(/mount webhooks\(\) before express\.json\(\)/g)).toHaveLength(1)
    expect(stdout).not.toContain("check the receiver's logs")
    expect(receivers.get('parses-json-first')!.logged.some((line) => line.includes('body_already_parsed') && line.includes('before express.json()'))).toBe(true)
    expect(code).toBe(1)
  })

  it('a runs URL that answers 404 HTML is named as such, with what it must return (no JSON parse error)', async () => {
    const receiver = receivers.get('correct')!
    const runsUrl = receiver.url.replace('/webhooks/svc', '/no-such-runs')
    const { code, stdout, stderr } = await runCli(['doctor', receiver.url, '--runs-url', runsUrl])
    expect(stderr).toContain(`--runs-url ${runsUrl}: the runs URL answered 404;`)
    expect(stderr).toContain('it must answer GET with 200 and JSON {"runs": {"<delivery id>": <times the handler finished>}}')
    expect(stderr).not.toMatch(/Unexpected token|SyntaxError|JSON\.parse/)
    expect(stdout).toBe('') // nothing was sent
    expect(code).toBe(2)
  })

  it('stops with exit 1 when nothing answers, and exit 2 on usage errors', async () => {
    const closed = await startReceiver('correct')
    const url = closed.url
    await closed.close()
    const down = await runCli(['doctor', url, '--timeout', '2000'])
    expect(down.stdout).toMatch(/stopped: .* did not answer \(ECONNREFUSED\)/)
    // Refused is not slow: the fix is about a server that is not there, not about answering faster.
    expect(down.stdout).toContain(`valid delivery: nothing is listening at ${new URL(url).host}: is the server running, and on this port?`)
    expect(down.stdout).not.toMatch(/10 s|slow|queue/)
    expect(down.code).toBe(1)
    const usage = await runCli(['doctor'])
    expect(usage.stderr).toContain('the receiver URL')
    expect(usage.code).toBe(2)
    const noSecret = await runCli(['doctor', url], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(noSecret.stderr).toMatch(/no secret: \$SVC_WEBHOOK_SECRET is not set/)
    expect(noSecret.code).toBe(2)
  })
})
