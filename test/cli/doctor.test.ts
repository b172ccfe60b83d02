/**
 * `svc-webhooks doctor` as users run it (the built bin, a child process) against live receivers on
 * 127.0.0.1: it passes the correct one and catches each broken one on the right row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
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
    expect(code).toBe(1)
  })

  it('stops with exit 1 when nothing answers, and exit 2 on usage errors', async () => {
    const closed = await startReceiver('correct')
    const url = closed.url
    await closed.close()
    const down = await runCli(['doctor', url, '--timeout', '2000'])
    expect(down.stdout).toMatch(/stopped: .* did not answer/)
    expect(down.code).toBe(1)
    const usage = await runCli(['doctor'])
    expect(usage.stderr).toContain('the receiver URL')
    expect(usage.code).toBe(2)
    const noSecret = await runCli(['doctor', url], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(noSecret.stderr).toMatch(/no secret: \$SVC_WEBHOOK_SECRET is not set/)
    expect(noSecret.code).toBe(2)
  })
})
