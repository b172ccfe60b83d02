/**
 * `svc-webhooks endpoints resend --from-log` against hostile logs. The logs are written by a real
 * receiver (its own log window, on an injected clock) that holds a stale secret while the service
 * signs with the current one, with forged requests mixed in; the built CLI reads them as users
 * run it (a child process), against the service emulator:
 * - a forged id holding `.` or `(` hides no genuine id, neither in today's lines nor in a line as
 *   the previous version wrote it (forged id in the middle of the list);
 * - a `:` in a tenant's name hides no id;
 * - made-up ids cannot push genuine ones out of a full summary;
 * - a line it cannot read is reported with its number, never skipped silently;
 * - a log naming more ids than a few disables' worth, a summary at its cap, or a log older than
 *   the dedupe retention resends nothing without --yes.
 */
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver, type WebhookReceiverOptions } from 'svc-webhooks'
import { createServiceEmulator, sampleEvent, signWebhook, type ServiceEmulator } from 'svc-webhooks/testing'
import { runCli } from '../support/broken-receivers.js'

/** The secret the service signs with now. */
const CURRENT = 'svc_whsec_Q3VycmVudFNlY3JldEZyb21Mb2dUZXN0cw'
/** What a stale deploy of the receiver holds: every genuine delivery is refused 401 and dropped. */
const STALE = 'svc_whsec_U3RhbGVTZWNyZXRGcm9tTG9nVGVzdHNYeA'
const WINDOW_MS = 10_000

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-from-log-'))
let emulator: ServiceEmulator
let env: Record<string, string>
let files = 0

beforeAll(async () => {
  emulator = await createServiceEmulator({ retry: { firstDelayMs: 1, maxDelayMs: 2, maxAttempts: 1 } })
  env = { SVC_API_URL: emulator.baseUrl, SVC_API_TOKEN: emulator.token, SVC_BUSINESS_ID: emulator.businessId }
})
afterAll(async () => {
  await emulator.close()
  rmSync(dir, { recursive: true, force: true })
})

/** A receiver with the stale secret, its lines, and its clock. */
function staleReceiver(options: Partial<WebhookReceiverOptions> = {}) {
  const lines: string[] = []
  let at = Date.now()
  const r = createWebhookReceiver({ secret: STALE, now: () => at, log: (line) => void lines.push(line), on: { 'message.received': () => undefined }, ...options })
  return { r, lines, advance: (ms: number) => void (at += ms) }
}

/** A genuine delivery: signed by the service with its current secret. */
async function genuine(id = crypto.randomUUID(), headers: Record<string, string> = {}) {
  const signed = await signWebhook({ secret: CURRENT, event: sampleEvent('message.received'), id })
  return { method: 'POST', body: signed.rawBody, headers: { ...signed.headers, ...headers } }
}

/** A forged request: any id, a made-up signature. */
async function forged(id: string, headers: Record<string, string> = {}) {
  const request = await genuine(id, headers)
  request.headers['svc-webhook-signature-v2'] = `v2=${'0'.repeat(64)}`
  return request
}

function logFile(lines: string[]): string {
  const file = join(dir, `receiver-${++files}.log`)
  writeFileSync(file, `${lines.join('\n')}\n`)
  return file
}

const dryRun = async (file: string) => {
  const out = await runCli(['endpoints', 'resend', '--from-log', file, '--dry-run'], { env })
  return { ...out, ids: out.stdout.trim().split('\n').filter(Boolean) }
}

describe('resend --from-log takes ids by their UUID shape', () => {
  it('a forged id with a "." or a "(" in each 10 s window hides none of the genuine refused deliveries', async () => {
    const { r, lines, advance } = staleReceiver()
    const refused: string[] = []
    for (let window = 0; window < 3; window++) {
      for (let i = 0; i < 10; i++) {
        if (i === 1) expect((await r.handle(await forged(`x.(forged-${window}`))).status).toBe(401)
        const request = await genuine()
        refused.push(request.headers['svc-webhook-id']!)
        expect((await r.handle(request)).status).toBe(401)
      }
      advance(WINDOW_MS)
    }
    await r.handle(await forged('last'))
    expect(lines.filter((line) => line.includes(' more in '))).toHaveLength(3)
    // As the previous version printed a summary: the ids in arrival order, the forged one among them.
    const [first, ...rest] = refused.slice(0, 10)
    const older = [
      `svc-webhooks: 401 invalid_signature (delivery ${first}): No v2 signature matched.`,
      `svc-webhooks: 401 invalid_signature: 10 more in the last 10 s, delivery ids ${rest[0]} x.(forged ${rest.slice(1).join(' ')}. Each one is counted in stats() and passed to onResult.`,
    ]
    for (const log of [lines, older]) {
      const out = await dryRun(logFile(log))
      expect(out.code, out.stderr).toBe(0)
      expect(out.ids.sort()).toEqual([...(log === older ? refused.slice(0, 10) : refused)].sort())
      expect(out.stderr).toMatch(/note: \d+ refusals named an id that is not a UUID/)
    }
  })

  it('a ":" in a tenant name hides no id', async () => {
    const tenant = 'shop: main (eu): 2'
    const { r, lines, advance } = staleReceiver({
      secret: (req: { headers: Record<string, string> }) => (req.headers['x-tenant'] === tenant ? STALE : []),
      endpoint: (req: { headers: Record<string, string> }) => req.headers['x-tenant'] ?? '',
    })
    const refused: string[] = []
    for (let i = 0; i < 8; i++) {
      const request = await genuine(undefined, { 'x-tenant': tenant })
      refused.push(request.headers['svc-webhook-id']!)
      expect((await r.handle(request)).status).toBe(401)
    }
    // The window ends: the next line brings its summary first.
    advance(WINDOW_MS)
    await r.handle(await forged('next', { 'x-tenant': tenant }))
    expect(lines[1]).toMatch(/^svc-webhooks: 401 invalid_signature, endpoint shop: main \(eu\): 2: 7 more in the last 10 s, delivery ids /)
    const out = await dryRun(logFile(lines))
    expect(out.code, out.stderr).toBe(0)
    expect(out.ids.sort()).toEqual([...refused].sort())
  })

  it('made-up ids that are no UUID cannot push genuine ones out of a full summary', async () => {
    const { r, lines, advance } = staleReceiver()
    await r.handle(await forged('opens-the-window'))
    for (let i = 0; i < 300; i++) await r.handle(await forged(`made-up-${i}`))
    const refused: string[] = []
    for (let i = 0; i < 5; i++) {
      const request = await genuine()
      refused.push(request.headers['svc-webhook-id']!)
      await r.handle(request)
    }
    advance(WINDOW_MS)
    await r.handle(await forged('next'))
    expect(lines[1]).toMatch(/: 305 more in the last 10 s, delivery ids .* \(and 55 not listed\)\./)
    const out = await dryRun(logFile(lines))
    expect(out.ids.sort()).toEqual([...refused].sort())
  })

  it('a line it cannot read is reported with its number; the others are still read', async () => {
    const [a, b, c, d, e, f] = Array.from({ length: 6 }, () => crypto.randomUUID()) as [string, string, string, string, string, string]
    const file = logFile([
      `svc-webhooks: 401 invalid_signature (delivery ${a}): No v2 signature matched.`,
      // Cut by a log shipper's line limit, in the middle of an id.
      `svc-webhooks: 401 invalid_signature: 3 more in the last 10 s, delivery ids ${b} ${c} ${d.slice(0, 20)}`,
      `svc-webhooks: 401 invalid_signature (delivery ${d.slice(0, 13)}`,
      `{"outcome":"refused","status":401,"code":"invalid_signature","id":"${d}`,
      `svc-webhooks: 404 unknown_endpoint ~ a form of line no version wrote`,
      `svc-webhooks: 400 missing_timestamp: No svc-webhook-timestamp header.`,
      `svc-webhooks: other lines: 399 more in the last 10 s, delivery ids ${crypto.randomUUID()}. Each one is counted in stats() and passed to onResult.`,
      // As a container runtime wraps a line: read, and nothing reported.
      JSON.stringify({ log: `svc-webhooks: 401 invalid_signature: 2 more in the last 10 s, delivery ids ${e} ${f}. Each one is counted in stats() and passed to onResult.\n`, stream: 'stderr' }),
    ])
    const out = await dryRun(file)
    expect(out.code).toBe(0)
    expect(out.ids.sort()).toEqual([a, b, c, e, f].sort())
    expect(out.stderr).toContain(`warning: ${file}:2 not read: a summary line cut short in its list of ids.`)
    expect(out.stderr).toContain(`warning: ${file}:3 not read: a refusal line cut short in its delivery id.`)
    expect(out.stderr).toContain(`warning: ${file}:4 not read: a JSON line that does not parse (cut short?).`)
    expect(out.stderr).toContain(`warning: ${file}:5 not read: a 404 line of svc-webhooks in a form this version does not read.`)
    expect(out.stderr).toContain(`warning: ${file}:7 not read: a summary of lines of more kinds than the log keeps apart`)
    expect(out.stderr).not.toMatch(new RegExp(`${file}:[68] `))
    expect(out.stderr).not.toContain('note:')
  })
})

describe('resend --from-log fed by an attacker: nothing resent without --yes', () => {
  /** The resend calls the emulator received. */
  const resends = () => emulator.apiCalls().filter((c) => c.method === 'POST' && c.path.endsWith('/resend')).length

  it('a log naming more than 100 made-up UUIDs: refused with the reason, no call; --yes resends them', async () => {
    const { r, lines, advance } = staleReceiver()
    for (let i = 0; i < 12; i++) {
      for (let j = 0; j < 10; j++) await r.handle(await forged(crypto.randomUUID()))
      advance(WINDOW_MS)
    }
    await r.handle(await forged('next'))
    const file = logFile(lines)
    expect((await dryRun(file)).ids).toHaveLength(120)
    const before = resends()
    const out = await runCli(['endpoints', 'resend', '--from-log', file], { env })
    expect(out.code).toBe(2)
    expect(out.stderr).toMatch(/nothing resent: it names 120 ids \(more than 100\)\..*--yes to resend all 120/)
    expect(resends()).toBe(before)

    const yes = await runCli(['endpoints', 'resend', '--from-log', file, '--yes', '--json'], { env })
    // Made up: the service knows none of them.
    expect(yes.code).toBe(1)
    expect(resends()).toBe(before + 120)
    expect((JSON.parse(yes.stdout) as Array<{ status: number }>).every((result) => result.status === 404)).toBe(true)
  })

  it('a summary at its cap of 250 (a flood, not the sender) needs --yes, however few ids', async () => {
    const { r, lines, advance } = staleReceiver()
    await r.handle(await forged('opens-the-window'))
    for (let i = 0; i < 251; i++) await r.handle(await forged(`made-up-${i}`))
    const request = await genuine()
    await r.handle(request)
    advance(WINDOW_MS)
    await r.handle(await forged('next'))
    const file = logFile(lines)
    const before = resends()
    const out = await runCli(['endpoints', 'resend', '--from-log', file], { env })
    expect(out.code).toBe(2)
    expect(out.stderr).toContain('1 summary line hit the cap of 250 ids per 10 s')
    expect(resends()).toBe(before)
  })

  it('a log last written more than 72 h ago needs --yes; a fresh one with a few ids does not', async () => {
    const id = emulator.send((await createEndpoint()).id)
    await emulator.settled()
    const file = logFile([`svc-webhooks: 401 invalid_signature (delivery ${id}): No v2 signature matched.`])
    const old = (Date.now() - 73 * 3_600_000) / 1000
    utimesSync(file, old, old)
    const before = resends()
    const out = await runCli(['endpoints', 'resend', '--from-log', file], { env })
    expect(out.code).toBe(2)
    expect(out.stderr).toMatch(/it was last written 73 h ago, past the receiver's dedupe retention/)
    expect(resends()).toBe(before)

    const now = Date.now() / 1000
    utimesSync(file, now, now)
    const fresh = await runCli(['endpoints', 'resend', '--from-log', file], { env })
    expect(fresh.code, fresh.stderr).toBe(0)
    expect(fresh.stdout).toContain(`resent ${id}`)
  })
})

/** An endpoint at the emulator whose URL refuses every delivery (nothing listens there). */
async function createEndpoint() {
  const response = await fetch(`${emulator.baseUrl}/api/v1/webhook-endpoints`, {
    method: 'POST',
    headers: { authorization: `Bearer ${emulator.token}`, 'business-id': emulator.businessId, 'content-type': 'application/json' },
    body: JSON.stringify({ label: 'gone', url: 'http://127.0.0.1:9/', subscribed_events: [] }),
  })
  return (await response.json()) as { id: string }
}
