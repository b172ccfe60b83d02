/**
 * `svc-webhooks send` and `sign` as users run them (the built bin, a child process) against a
 * correct receiver on 127.0.0.1 built on the installed package.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyWebhook } from 'svc-webhooks'
import { runCli, SECRET, startReceiver, type Receiver } from '../support/broken-receivers.js'

let receiver: Receiver
const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-send-'))
beforeAll(async () => {
  receiver = await startReceiver('correct')
})
afterAll(async () => {
  await receiver.close()
  rmSync(dir, { recursive: true, force: true })
})

async function runs(): Promise<Record<string, number>> {
  return ((await (await fetch(receiver.runsUrl)).json()) as { runs: Record<string, number> }).runs
}

describe('svc-webhooks send', () => {
  it('delivers a signed sample: 200, the handler runs once; --resend gets a duplicate', async () => {
    const out = await runCli(['send', receiver.url, '--resend'])
    const id = /id (\S+)/.exec(out.stdout)?.[1]
    expect(out.stdout).toMatch(/^send: POST http:\/\/127\.0\.0\.1:\d+\/webhooks\/svc$/m)
    expect(out.stdout).toContain('event message.received')
    expect(out.stdout).toContain('signatures v2, v1')
    expect(out.stdout).toMatch(/^ {2}200 OK in \d+ ms: delivered\n {2}\{"ok":true\}$/m)
    expect(out.stdout).toMatch(/^resend: POST/m)
    expect(out.stdout).toContain(`id ${id} `)
    expect(out.stdout).toContain('{"ok":true,"duplicate":true}')
    expect(out.code).toBe(0)
    expect((await runs())[id!]).toBe(1)
  })

  it('--v1-only is refused (exit 1, 401, read as permanent); --id and --event are used', async () => {
    const out = await runCli(['send', receiver.url, '--v1-only', '--id', 'cli-test-v1'])
    expect(out.stdout).toContain('id cli-test-v1 ')
    expect(out.stdout).toContain('signatures v1')
    expect(out.stdout).toContain('401 Unauthorized')
    expect(out.stdout).toContain('a permanent refusal')
    expect(out.stdout).toContain('v1_not_allowed')
    expect(out.code).toBe(1)
    const unknown = await runCli(['send', receiver.url, '--event', 'template.approved'])
    expect(unknown.stdout).toContain('event template.approved')
    expect(unknown.stdout).toContain('{"ok":true,"ignored":true}')
    expect(unknown.code).toBe(0)
  })

  it('--body sends the file byte for byte', async () => {
    const file = join(dir, 'event.json')
    writeFileSync(file, '{ "event": "message.received",\n  "message": {"text": "caf\\u00e9"}, "zz": 1, "aa": 2 }')
    const out = await runCli(['send', receiver.url, '--body', file])
    expect(out.stdout).toContain('200 OK')
    expect(out.code).toBe(0)
  })

  it('no answer, bad URL, missing secret', async () => {
    const gone = await startReceiver('correct')
    await gone.close()
    const down = await runCli(['send', gone.url])
    expect(down.stdout).toMatch(/no answer after \d+ ms: ECONNREFUSED/)
    expect(down.code).toBe(1)
    expect((await runCli(['send', 'ftp://127.0.0.1/x'])).code).toBe(2)
    const noSecret = await runCli(['send', receiver.url], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(noSecret.stderr).toContain('no secret')
    expect(noSecret.code).toBe(2)
  })
})

describe('svc-webhooks sign', () => {
  const body = '{"event":"message.received","message":{"text":"Olá 🍝"}}'

  it('prints curl -H flags that a client can send as they are', async () => {
    const out = await runCli(['sign'], { input: body })
    expect(out.code).toBe(0)
    const headers = Object.fromEntries([...out.stdout.matchAll(/-H '([^:']+): ([^']*)'/g)].map((m) => [m[1]!, m[2]!]))
    expect(Object.keys(headers).sort()).toEqual(['content-type', 'svc-webhook-event', 'svc-webhook-id', 'svc-webhook-signature', 'svc-webhook-signature-v2', 'svc-webhook-timestamp'])
    const delivery = await verifyWebhook({ body, headers }, { secret: SECRET })
    expect(delivery.event.event).toBe('message.received')
    const res = await fetch(receiver.url, { method: 'POST', headers, body })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ ok: true })
  })

  it('--format json with --id and --timestamp; the output never holds the secret', async () => {
    const file = join(dir, 'sign.json')
    writeFileSync(file, body)
    const out = await runCli(['sign', '--body', file, '--format', 'json', '--id', 'evt-1', '--timestamp', '1767225600'])
    const headers = JSON.parse(out.stdout) as Record<string, string>
    expect(headers['svc-webhook-id']).toBe('evt-1')
    expect(headers['svc-webhook-timestamp']).toBe('1767225600')
    await expect(verifyWebhook({ body, headers }, { secret: SECRET, now: () => 1767225600_000 })).resolves.toMatchObject({ id: 'evt-1' })
    expect(out.stdout + out.stderr).not.toContain(SECRET)
    expect(out.code).toBe(0)
  })

  it('refuses a secret with whitespace and a bad --format (exit 2); warns on an unprefixed secret', async () => {
    const spaced = await runCli(['sign'], { input: body, env: { SVC_WEBHOOK_SECRET: `${SECRET}\n` } })
    expect(spaced.stderr).toContain('whitespace')
    expect(spaced.code).toBe(2)
    expect((await runCli(['sign', '--format', 'yaml'], { input: body })).code).toBe(2)
    const bare = await runCli(['sign', '--secret-env', 'MY_SECRET'], { input: body, env: { MY_SECRET: 'plain-test-secret' } })
    expect(bare.stderr).toContain('does not start with "svc_whsec_"')
    expect(bare.stderr).not.toContain('plain-test-secret')
    expect(bare.code).toBe(0)
  })

  it('every command has --help (exit 0); no command is a usage error (exit 2)', async () => {
    for (const command of ['send', 'sign', 'verify', 'doctor']) {
      const out = await runCli([command, '--help'])
      expect(out.stdout).toMatch(new RegExp(`^Usage: svc-webhooks ${command}`))
      expect(out.stdout).toContain('Exit codes:')
      expect(out.code).toBe(0)
    }
    expect((await runCli([])).code).toBe(2)
    expect((await runCli(['frobnicate'])).stderr).toContain('unknown command')
  })
})
