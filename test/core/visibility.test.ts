/**
 * Visible by default: the receiver's own log lines (refusals and failures with code, delivery id
 * and fix; never the body, a secret or an error message that could quote them), repeats of a code
 * collapsed into one summary per window, the startup warnings, the failing-streak warning (not
 * driven by forged traffic), and `stats()`. The default log is checked on a real Express server
 * in a child process, by its captured stderr; the rest in process with a `log` function and, where
 * the window matters, a clock the test moves.
 */
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ANSWERS, createWebhookReceiver, MemoryInbox, MemoryStore, type WebhookReceiverOptions, type WebhookResult } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { pathRequestTransport, type PathRequest } from '../support/transports.js'

const SECRET = 'svc_whsec_VisibilityTestSecretMarker42'
const root = join(dirname(fileURLToPath(import.meta.url)), '../..')

async function delivery(options: { secret?: string; id?: string; text?: string } = {}) {
  const event = sampleEvent('message.received')
  event.message.text = options.text ?? 'BodyMarkerNeverLogged'
  const signed = await signWebhook({ secret: options.secret ?? SECRET, event, id: options.id })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers }
}

function receiver(options: Partial<WebhookReceiverOptions> = {}) {
  const lines: string[] = []
  const r = createWebhookReceiver({ secret: SECRET, on: { 'message.received': () => {} }, log: (line) => lines.push(line), ...options })
  return { r, lines }
}

describe('startup warnings', () => {
  it('an `on` key that is not a known event type, with the likely fix', () => {
    const { lines } = receiver({ on: { 'message.recieved': () => {} } as never })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/"message\.recieved", which is not an event type the service sends .*Did you mean "message\.received"\?/)
  })

  it('a secret without svc_whsec_, never quoting it', () => {
    const { lines } = receiver({ secret: 'MfKQ9r8GKYqrPastedWithoutPrefix' })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/does not start with "svc_whsec_"/)
    expect(lines[0]).not.toContain('MfKQ9r8GKYqr')
  })

  it('none for a correct receiver, and none at all with log: false', () => {
    expect(receiver().lines).toEqual([])
    const lines: string[] = []
    const original = console.warn
    console.warn = (line: string) => void lines.push(line)
    try {
      createWebhookReceiver({ secret: 'unprefixed', on: { typo: () => {} } as never, log: false })
    } finally {
      console.warn = original
    }
    expect(lines).toEqual([])
  })
})

describe('one line per refused or failed delivery', () => {
  it('a wrong secret: status, code, delivery id and the fix; never the body, the secret or a signature', async () => {
    const { r, lines } = receiver()
    const bad = await delivery({ secret: 'svc_whsec_SomeOtherSecret', id: 'evt-logged-1' })
    await r.handle(bad)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^svc-webhooks: 401 invalid_signature \(delivery evt-logged-1\): No v2 signature matched/)
    for (const forbidden of [SECRET, 'svc_whsec_SomeOtherSecret', 'BodyMarkerNeverLogged', bad.headers['svc-webhook-signature-v2']!.slice(3)]) {
      expect(lines[0]).not.toContain(forbidden)
    }
  })

  it('a stale timestamp, a stripped header, a handler that throws, an ignored type (once per type)', async () => {
    const { r, lines } = receiver({
      now: () => Date.now() + 3_600_000,
      on: {
        'message.received': (event) => {
          if (event.message.text === 'boom') throw new Error('database down')
        },
      },
    })
    await r.handle(await delivery({ id: 'evt-stale' }))
    const { r: r2, lines: lines2 } = receiver({
      on: {
        'message.received': (event) => {
          if (event.message.text === 'boom') throw new Error('database down')
        },
      },
    })
    const stripped = await delivery()
    delete (stripped.headers as Record<string, string>)['svc-webhook-signature-v2']
    await r2.handle(stripped)
    await r2.handle(await delivery({ id: 'evt-boom', text: 'boom' }))
    const { r: r3, lines: lines3 } = receiver({ on: {} })
    await r3.handle(await delivery({ id: 'evt-ignored-1' }))
    await r3.handle(await delivery({ id: 'evt-ignored-2' }))
    expect(lines[0]).toMatch(/^svc-webhooks: 401 timestamp_too_old \(delivery evt-stale\): .*check NTP/)
    expect(lines2[0]).toMatch(/^svc-webhooks: 401 v1_not_allowed .*a proxy forwards svc-webhook-signature-v2/)
    expect(lines2[1]).toMatch(/^svc-webhooks: 500 handler_failed \(delivery evt-boom\): the handler threw.*\(Error; its message is left to onResult/)
    expect(lines3).toHaveLength(1)
    expect(lines3[0]).toMatch(/200 ignored \(delivery evt-ignored-1\): no handler for "message\.received"/)
  })

  it('the handler_failed line names the error, never its message: JSON.parse quoting the body leaves no body text in the log', async () => {
    const results: WebhookResult[] = []
    const { r, lines } = receiver({
      on: { 'message.received': (event) => void JSON.parse(event.message.text) },
      onResult: (result) => void results.push(result),
    })
    const answer = await r.handle(await delivery({ id: 'evt-parse', text: 'BodyMarker' }))
    expect(answer.status).toBe(500)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^svc-webhooks: 500 handler_failed \(delivery evt-parse\): the handler threw.*\(SyntaxError; its message is left to onResult/)
    expect(lines[0]).not.toContain('BodyMarker')
    // onResult still gets the whole error.
    expect(String((results[0]!.error as Error).message)).toContain('BodyMarker')
  })

  it('a failure that is no refusal is logged with the cause and fix of its row of the answers table', async () => {
    const memory = new MemoryStore()
    const down = () => Promise.reject(new Error('ECONNREFUSED'))
    const { r: store, lines: storeLines } = receiver({ store: { claim: down, complete: (k, o, res) => memory.complete(k, o, res), release: (k, o) => memory.release(k, o) } })
    await store.handle(await delivery({ id: 'evt-store' }))
    const inbox = new MemoryInbox()
    inbox.append = down
    const { r: inboxed, lines: inboxLines } = receiver({ inbox })
    await inboxed.handle(await delivery({ id: 'evt-inbox' }))
    const { r: failing, lines: handlerLines } = receiver({ on: { 'message.received': () => Promise.reject(new Error('down')) } })
    await failing.handle(await delivery({ id: 'evt-handler' }))
    const cases = [
      [storeLines, 'store_unavailable', 'evt-store'],
      [inboxLines, 'inbox_unavailable', 'evt-inbox'],
      [handlerLines, 'handler_failed', 'evt-handler'],
    ] as const
    for (const [lines, name, id] of cases) {
      const row = ANSWERS[name]
      expect(lines, name).toHaveLength(1)
      expect(lines[0]!.startsWith(`svc-webhooks: ${row.status} ${name} (delivery ${id}): ${row.cause}; ${row.fix}. (Error;`), lines[0]).toBe(true)
    }
  })

  it('a completion the store did not record: the line says what follows, with the error\'s name and code, never a message that could quote input', async () => {
    const storeWhose = (complete: () => Promise<boolean>) => {
      const memory = new MemoryStore()
      return {
        claim: (key: string, owner: string, leaseMs: number) => memory.claim(key, owner, leaseMs),
        release: (key: string, owner: string) => memory.release(key, owner),
        complete,
      }
    }
    const unrecorded = receiver({
      store: storeWhose(async () => {
        throw Object.assign(new Error('ERR wrong type for {"text":"BodyMarkerNeverLogged"}'), { code: 'WRONGTYPE' })
      }),
    })
    expect((await unrecorded.r.handle(await delivery({ id: 'evt-unrecorded' }))).status).toBe(200)
    expect(unrecorded.lines).toEqual([
      'svc-webhooks: 200 processed (delivery evt-unrecorded), but: the store did not record it, so a retry may run it again ' +
        '(Error (WRONGTYPE); its message is left to onResult, as it may quote the delivery)',
    ])
    // The lease ran out while the handler ran: our own message, as is.
    const outlasted = receiver({ store: storeWhose(async () => false) })
    expect((await outlasted.r.handle(await delivery({ id: 'evt-outlasted' }))).status).toBe(200)
    expect(outlasted.lines).toEqual([expect.stringMatching(/^svc-webhooks: 200 processed \(delivery evt-outlasted\), but: svc-webhooks: the handler outlasted `leaseMs`/)])
  })

  it('warns at 5, 10 and 15 failing answers in a row to verified deliveries; a success resets the streak; stats() counts by outcome and code', async () => {
    const { r, lines } = receiver({
      on: {
        'message.received': (event) => {
          if (event.message.text === 'boom') throw new Error('database down')
        },
      },
    })
    for (let i = 0; i < 15; i++) await r.handle(await delivery({ text: 'boom' }))
    const streak = lines.filter((line) => line.includes('failing answers in a row'))
    expect(streak.map((line) => line.match(/(\d+) failing/)![1])).toEqual(['5', '10', '15'])
    expect(streak[0]).toMatch(/^svc-webhooks: 5 failing answers in a row \(last: 500 handler_failed\), counting signed deliveries.*disables the endpoint after 20 consecutive failures.*Not counted.*refusals of unsigned or wrongly signed requests/)
    expect(await r.stats()).toMatchObject({
      answers: { handler_failed: 15 },
      codes: { handler_failed: 15 },
      consecutiveFailures: 15,
      lastFailure: { status: 500, code: 'handler_failed' },
    })
    await r.handle(await delivery())
    expect(await r.stats()).toMatchObject({ answers: { handler_failed: 15, processed: 1 }, consecutiveFailures: 0 })
  })

  it('forged deliveries neither lengthen nor end the streak, while stats() counts each by code; the receiver\'s own faults do count', async () => {
    const { r, lines } = receiver({
      on: {
        'message.received': (event) => {
          if (event.message.text === 'boom') throw new Error('database down')
        },
      },
    })
    const forged = await delivery({ secret: 'svc_whsec_Forged' })
    for (let i = 0; i < 2000; i++) await r.handle(forged)
    expect(lines.filter((line) => line.includes('failing answers in a row'))).toEqual([])
    expect(await r.stats()).toMatchObject({ answers: { refused: 2000 }, codes: { invalid_signature: 2000 }, consecutiveFailures: 0 })
    expect((await r.stats()).lastFailure).toBeUndefined()

    // Four real failures, forged traffic between them, then the fifth: the warning counts five.
    for (let i = 0; i < 4; i++) await r.handle(await delivery({ text: 'boom' }))
    for (let i = 0; i < 100; i++) await r.handle(forged)
    await r.handle(await delivery({ text: 'boom' }))
    expect(lines.filter((line) => line.includes('failing answers in a row')).map((line) => line.match(/(\d+) failing/)![1])).toEqual(['5'])
    expect((await r.stats()).consecutiveFailures).toBe(5)

    // A secret lookup that fails is this receiver's fault, whoever asked: counted.
    const tenants = receiver({ secret: () => Promise.reject(new Error('vault down')), endpoint: () => 'shop' })
    for (let i = 0; i < 5; i++) await tenants.r.handle(forged)
    expect(tenants.lines.filter((line) => line.includes('failing answers in a row'))).toHaveLength(1)
    expect(await tenants.r.stats()).toMatchObject({ codes: { secret_lookup_failed: 5 }, consecutiveFailures: 5 })
  })

  it('stats() includes the inbox figures when there is one', async () => {
    const inbox = new MemoryInbox()
    const { r } = receiver({ inbox })
    await r.handle(await delivery())
    expect(await r.stats()).toMatchObject({ answers: { accepted: 1 }, consecutiveFailures: 0, inbox: { depth: 1, dead: 0, retrying: 0 } })
  })
})

describe('repeats collapsed per code and window', () => {
  afterEach(() => void vi.useRealTimers())

  /** A receiver on a clock the test moves. */
  function clocked(options: Partial<WebhookReceiverOptions> = {}) {
    // Stands still unless moved: the deliveries' timestamps (wall clock) stay well inside the tolerance.
    const start = Date.now()
    let at = start
    const r = receiver({ now: () => at, ...options })
    return { ...r, start, advance: (ms: number) => void (at += ms) }
  }

  it('the first refusal of a code at once, its repeats in one summary when the window ends, another code at once meanwhile', async () => {
    const { r, lines, advance } = clocked()
    const forged = await delivery({ secret: 'svc_whsec_Forged', id: 'evt-forged' })
    for (let i = 0; i < 500; i++) await r.handle(forged)
    expect(lines).toHaveLength(1)
    const stale = await delivery({ id: 'evt-other-code' })
    stale.headers['svc-webhook-timestamp'] = '1000000000'
    await r.handle(stale)
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(/^svc-webhooks: 401 timestamp_too_old \(delivery evt-other-code\)/)
    advance(9_999)
    await r.handle(forged)
    expect(lines).toHaveLength(2)
    advance(1)
    await r.handle(forged)
    expect(lines.slice(2)).toEqual([
      'svc-webhooks: 401 invalid_signature: 500 more in the last 10 s, delivery id evt-forged. Each one is counted in stats() and passed to onResult.',
      expect.stringMatching(/^svc-webhooks: 401 invalid_signature \(delivery evt-forged\)/),
    ])
  })

  it('a summary written long after its window (no timer ran, as on an edge runtime between requests) says when the window was', async () => {
    const { r, lines, advance, start } = clocked()
    const forged = await delivery({ secret: 'svc_whsec_Forged', id: 'evt-late' })
    for (let i = 0; i < 4; i++) await r.handle(forged)
    advance(3_600_000)
    await r.handle(forged)
    expect(lines).toHaveLength(3)
    expect(lines[1]).toMatch(`svc-webhooks: 401 invalid_signature: 3 more in the 10 s from ${new Date(start).toISOString()}, delivery id evt-late.`)
  })

  it('the summary comes out when traffic stops, by a timer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const { r, lines } = receiver({ now: () => Date.now() })
    const forged = await delivery({ secret: 'svc_whsec_Forged', id: 'evt-quiet' })
    for (let i = 0; i < 3; i++) await r.handle(forged)
    expect(lines).toHaveLength(1)
    vi.advanceTimersByTime(10_000)
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(/^svc-webhooks: 401 invalid_signature: 2 more in the last 10 s, delivery id evt-quiet\./)

    // A `log` that throws on the summary, outside any request, cannot end the process.
    const throwing = createWebhookReceiver({
      secret: SECRET,
      on: { 'message.received': () => {} },
      now: () => Date.now(),
      log: (line) => {
        if (line.includes('more in the last')) throw new Error('log sink down')
      },
    })
    for (let i = 0; i < 3; i++) await throwing.handle(forged)
    expect(() => vi.advanceTimersByTime(10_000)).not.toThrow()
  })

  it('the timer keeps no process alive: a script that refuses and ends exits at once, its summary unwritten', async () => {
    const script = `
      import { createWebhookReceiver } from 'svc-webhooks'
      import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
      const r = createWebhookReceiver({ secret: '${SECRET}', on: { 'message.received': () => {} } })
      const forged = await signWebhook({ secret: 'svc_whsec_Forged', event: sampleEvent('message.received'), id: 'evt-script' })
      for (let i = 0; i < 3; i++) await r.handle({ method: 'POST', body: forged.rawBody, headers: forged.headers })
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const code = await new Promise((resolve) => child.once('exit', resolve))
    expect(code).toBe(0)
    const written = stderr.split('\n').filter(Boolean)
    expect(written).toHaveLength(1)
    expect(written[0]).toMatch(/^svc-webhooks: 401 invalid_signature \(delivery evt-script\)/)
  })

  it('tenants: a window per endpoint the secret lookup found, one for every made-up name', async () => {
    const secrets: Record<string, string> = { 'shop-a': 'svc_whsec_A', 'shop-b': 'svc_whsec_B' }
    const tenantOf = (request: PathRequest) => decodeURIComponent(request.path.split('/')[2]!)
    const lines: string[] = []
    const r = createWebhookReceiver<PathRequest>({
      secret: (request) => secrets[tenantOf(request)],
      endpoint: tenantOf,
      on: { 'message.received': () => {} },
      log: (line) => void lines.push(line),
    })
    const forged = await delivery({ secret: 'svc_whsec_Forged', id: 'evt-tenant' })
    const send = (tenant: string) =>
      r.receive({ method: 'POST', path: `/tenants/${encodeURIComponent(tenant)}/webhooks`, headers: forged.headers, body: forged.body as Uint8Array }, pathRequestTransport)
    for (let i = 0; i < 50; i++) await send('shop-a')
    for (let i = 0; i < 50; i++) await send('shop-b')
    for (let i = 0; i < 50; i++) expect((await send(`made-up-${i}`)).status).toBe(404)
    expect(lines).toEqual([
      expect.stringMatching(/^svc-webhooks: 401 invalid_signature \(delivery evt-tenant, endpoint shop-a\)/),
      expect.stringMatching(/^svc-webhooks: 401 invalid_signature \(delivery evt-tenant, endpoint shop-b\)/),
      expect.stringMatching(/^svc-webhooks: 404 unknown_endpoint \(delivery evt-tenant, endpoint made-up-0\)/),
    ])
  })

  it('bounded whatever the tenants: past 100 open windows, every other kind is counted in one', async () => {
    let at = Date.now()
    const lines: string[] = []
    const tenantOf = (request: PathRequest) => request.path.split('/')[2]!
    const r = createWebhookReceiver<PathRequest>({
      // Every shop-N is a real tenant here: 300 of them, each sent forged deliveries.
      secret: (request) => (tenantOf(request).startsWith('shop-') ? 'svc_whsec_Shop' : undefined),
      endpoint: tenantOf,
      on: { 'message.received': () => {} },
      log: (line) => void lines.push(line),
      now: () => at,
    })
    const forged = await delivery({ secret: 'svc_whsec_Forged', id: 'evt-many' })
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 300; i++) {
        await r.receive({ method: 'POST', path: `/tenants/shop-${i}/webhooks`, headers: forged.headers, body: forged.body as Uint8Array }, pathRequestTransport)
      }
    }
    expect(lines).toHaveLength(101)
    expect(lines[99]).toMatch(/endpoint shop-99\)/)
    expect(lines[100]).toMatch(/endpoint shop-100\)/)
    at += 10_000
    await r.receive({ method: 'POST', path: '/tenants/shop-0/webhooks', headers: forged.headers, body: forged.body as Uint8Array }, pathRequestTransport)
    expect(lines).toHaveLength(101 + 101 + 1)
    expect(lines).toContain('svc-webhooks: other lines: 399 more in the last 10 s, delivery id evt-many. Each one is counted in stats() and passed to onResult.')
    expect((await r.stats()).codes).toEqual({ invalid_signature: 601 })
  })
})

describe('the default log on a real server', () => {
  it('an Express app with a typo in `on`, a wrong secret and a handler whose JSON.parse quotes the body: the warning and both lines reach stderr, the body never', async () => {
    const app = `
      import express from 'express'
      import { webhooks } from 'svc-webhooks/express'
      const app = express()
      app.post('/webhooks/svc', webhooks({ secret: process.env.SECRET, on: { 'message.recieved': async () => {}, 'message.received': async (event) => JSON.parse(event.message.text) } }))
      const server = app.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })))
      process.stdin.resume(); process.stdin.on('end', () => process.exit(0))
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', app], { cwd: root, env: { ...process.env, SECRET }, stdio: ['pipe', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no port; stderr: ${stderr}`)), 20_000)
        createInterface({ input: child.stdout }).once('line', (line) => (clearTimeout(timer), resolve(JSON.parse(line).port)))
      })
      const bad = await delivery({ secret: 'svc_whsec_Wrong', id: 'evt-real-server' })
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: bad.headers, body: bad.body as BodyInit })
      expect(res.status).toBe(401)
      const parsed = await delivery({ id: 'evt-real-parse', text: 'BodyMarkerNeverLogged {' })
      const failed = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: parsed.headers, body: parsed.body as BodyInit })
      expect(failed.status).toBe(500)
      const deadline = Date.now() + 5_000
      while (!stderr.includes('evt-real-parse') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    } finally {
      child.stdin.end()
      child.kill()
    }
    expect(stderr).toMatch(/"message\.recieved", which is not an event type the service sends.*Did you mean "message\.received"/)
    expect(stderr).toMatch(/svc-webhooks: 401 invalid_signature \(delivery evt-real-server\): No v2 signature matched/)
    expect(stderr).toMatch(/svc-webhooks: 500 handler_failed \(delivery evt-real-parse\): the handler threw.*\(SyntaxError; /)
    expect(stderr).not.toContain(SECRET)
    expect(stderr).not.toContain('BodyMarkerNeverLogged')
  })
})
