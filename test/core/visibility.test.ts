/**
 * Visible by default: the receiver's own log lines (refusals and failures with code, delivery id
 * and fix; never the body or a secret), the startup warnings, the failing-streak warning, and
 * `stats()`. The default log is checked on a real Express server in a child process, by its
 * captured stderr; the rest in process with a `log` function.
 */
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, MemoryInbox, type WebhookReceiverOptions } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

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
    expect(lines2[1]).toMatch(/^svc-webhooks: 500 handler_failed \(delivery evt-boom\): the handler threw.*\(Error: database down\)/)
    expect(lines3).toHaveLength(1)
    expect(lines3[0]).toMatch(/200 ignored \(delivery evt-ignored-1\): no handler for "message\.received"/)
  })

  it('warns at 5, 10 and 15 failing answers in a row, and a success resets the streak; stats() reads the counters', async () => {
    const { r, lines } = receiver()
    const bad = await delivery({ secret: 'svc_whsec_Wrong' })
    for (let i = 0; i < 15; i++) await r.handle(bad)
    const streak = lines.filter((line) => line.includes('failing answers in a row'))
    expect(streak.map((line) => line.match(/(\d+) failing/)![1])).toEqual(['5', '10', '15'])
    expect(streak[0]).toMatch(/disables the endpoint after 20 consecutive failures/)
    expect(await r.stats()).toMatchObject({ answers: { refused: 15 }, consecutiveFailures: 15, lastFailure: { status: 401, code: 'invalid_signature' } })
    await r.handle(await delivery())
    expect(await r.stats()).toMatchObject({ answers: { refused: 15, processed: 1 }, consecutiveFailures: 0 })
  })

  it('stats() includes the inbox figures when there is one', async () => {
    const inbox = new MemoryInbox()
    const { r } = receiver({ inbox })
    await r.handle(await delivery())
    expect(await r.stats()).toMatchObject({ answers: { accepted: 1 }, consecutiveFailures: 0, inbox: { depth: 1, dead: 0, retrying: 0 } })
  })
})

describe('the default log on a real server', () => {
  it('an Express app with a typo in `on` and a wrong secret: the startup warning and the refusal line reach stderr', async () => {
    const app = `
      import express from 'express'
      import { webhooks } from 'svc-webhooks/express'
      const app = express()
      app.post('/webhooks/svc', webhooks({ secret: process.env.SECRET, on: { 'message.recieved': async () => {} } }))
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
      const deadline = Date.now() + 5_000
      while (!stderr.includes('evt-real-server') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    } finally {
      child.stdin.end()
      child.kill()
    }
    expect(stderr).toMatch(/"message\.recieved", which is not an event type the service sends.*Did you mean "message\.received"/)
    expect(stderr).toMatch(/svc-webhooks: 401 invalid_signature \(delivery evt-real-server\): No v2 signature matched/)
    expect(stderr).not.toContain(SECRET)
    expect(stderr).not.toContain('BodyMarkerNeverLogged')
  })
})
