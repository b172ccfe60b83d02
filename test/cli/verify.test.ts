/**
 * `svc-webhooks verify` as users run it (the built bin, a child process) on captured requests:
 * a good capture verifies; each way a delivery gets refused is named, with the exit code, and
 * the secret never appears in the output.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { runCli, SECRET } from '../support/broken-receivers.js'

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-verify-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let n = 0
/** Writes a capture as a JSON headers file and a body file; returns the verify flags. */
function capture(signed: Pick<SignedWebhook, 'headers'>, body: string | Uint8Array, form: 'json' | 'lines' = 'json'): string[] {
  const headers = join(dir, `h${++n}`)
  const file = join(dir, `b${n}`)
  writeFileSync(headers, form === 'json' ? JSON.stringify(signed.headers) : Object.entries(signed.headers).map(([k, v]) => `${k}: ${v}`).join('\n'))
  writeFileSync(file, body)
  return ['verify', '--headers', headers, '--body', file]
}

const sign = (options: Partial<Parameters<typeof signWebhook>[0]> = {}) => signWebhook({ secret: SECRET, event: sampleEvent('message.received'), ...options })

function expectNoSecret(out: { stdout: string; stderr: string }): void {
  expect(out.stdout + out.stderr).not.toContain(SECRET.slice('svc_whsec_'.length))
}

describe('svc-webhooks verify', () => {
  it('a good capture verifies (exit 0), from a JSON headers file or Name: value lines', async () => {
    const signed = await sign()
    for (const form of ['json', 'lines'] as const) {
      const out = await runCli(capture(signed, signed.rawBody, form))
      expect(out.stdout).toContain(`verified: delivery ${signed.id} (message.received, v2 signature)`)
      expect(out.code).toBe(0)
      expectNoSecret(out)
    }
  })

  it('a raw HTTP request file verifies (Content-Length honoured)', async () => {
    const signed = await sign()
    const file = join(dir, 'request.http')
    const head = ['POST /webhooks/svc HTTP/1.1', 'Host: example.test', ...Object.entries(signed.headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${signed.rawBody.byteLength}`]
    writeFileSync(file, Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), Buffer.from(signed.rawBody), Buffer.from('\n')]))
    const out = await runCli(['verify', '--request', file])
    expect(out.stdout).toContain('verified:')
    expect(out.code).toBe(0)
  })

  it('wrong secret', async () => {
    const signed = await sign({ secret: 'svc_whsec_some-other-endpoint' })
    const out = await runCli(capture(signed, signed.rawBody))
    expect(out.stdout).toContain('refused: invalid_signature (a receiver answers 401)')
    expect(out.stdout).toMatch(/^wrong secret:$/m)
    expect(out.stdout).toContain('FAIL  signature  v2 does not match, v1 does not match')
    expect(out.code).toBe(1)
    expectNoSecret(out)
  })

  it('a changed delivery id: v1 matches, v2 does not', async () => {
    const signed = await sign()
    const out = await runCli(capture({ headers: { ...signed.headers, 'svc-webhook-id': 'another-id' } }, signed.rawBody))
    expect(out.stdout).toContain('v2 does not match, v1 matches')
    expect(out.stdout).toMatch(/^delivery id changed:$/m)
    expect(out.code).toBe(1)
  })

  it('stale timestamp, with the measured skew; --now checks an old capture', async () => {
    const now = Math.floor(Date.now() / 1000)
    const signed = await sign({ timestamp: now - 3600 })
    const args = capture(signed, signed.rawBody)
    const out = await runCli([...args, '--now', String(now)])
    expect(out.stdout).toContain('refused: timestamp_too_old (a receiver answers 401)')
    expect(out.stdout).toContain('FAIL  timestamp  3600 s old (tolerance 300 s)')
    expect(out.stdout).toMatch(/^stale timestamp:$/m)
    expect(out.stdout).toContain('ok    signature  v2 matches')
    expect(out.code).toBe(1)
    const then = await runCli([...args, '--now', String(now - 3590)])
    expect(then.stdout).toContain('ok    timestamp  10 s old')
    expect(then.code).toBe(0)
  })

  it('v1-only (and --allow-v1 accepts it)', async () => {
    const signed = await sign({ schemes: ['v1'] })
    const args = capture(signed, signed.rawBody)
    const out = await runCli(args)
    expect(out.stdout).toContain('refused: v1_not_allowed (a receiver answers 401)')
    expect(out.stdout).toMatch(/^v1-only delivery:$/m)
    expect(out.code).toBe(1)
    const allowed = await runCli([...args, '--allow-v1'])
    expect(allowed.stdout).toContain('(message.received, v1 signature)')
    expect(allowed.code).toBe(0)
  })

  it('a parsed and re-serialized body: pretty-printed, and \\u escapes turned into UTF-8', async () => {
    const pretty = await sign()
    const out = await runCli(capture(pretty, JSON.stringify(JSON.parse(pretty.body), null, 2)))
    expect(out.stdout).toMatch(/^re-serialized body:$/m)
    expect(out.stdout).toContain('sorted keys and no whitespace')
    expect(out.stdout).toContain('before express.json()')
    expect(out.code).toBe(1)

    // Non-ASCII as \u escapes, as a sender with Python's ensure_ascii writes it.
    const escapedBody = pretty.body.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
    const escaped = await sign({ body: escapedBody })
    const reparsed = await runCli(capture(escaped, JSON.stringify(JSON.parse(escapedBody))))
    expect(reparsed.stdout).toMatch(/^re-serialized body:$/m)
    expect(reparsed.stdout).toContain('\\u escapes')
    expect(reparsed.code).toBe(1)
  })

  it('a body file with a trailing newline', async () => {
    const signed = await sign()
    const out = await runCli(capture(signed, `${signed.body}\n`))
    expect(out.stdout).toMatch(/^trailing newline in the body file:$/m)
    expect(out.code).toBe(1)
  })

  it('secret prefix missing, and whitespace in the secret', async () => {
    const signed = await sign()
    const args = capture(signed, signed.rawBody)
    const unprefixed = await runCli(args, { env: { SVC_WEBHOOK_SECRET: SECRET.slice('svc_whsec_'.length) } })
    expect(unprefixed.stdout).toMatch(/^secret prefix missing:$/m)
    expect(unprefixed.code).toBe(1)
    expectNoSecret(unprefixed)

    const spaced = await runCli(args, { env: { SVC_WEBHOOK_SECRET: ` ${SECRET}\n` } })
    expect(spaced.stdout).toMatch(/^whitespace in the secret:$/m)
    expect(spaced.stdout).toContain('ok    signature  v2 matches')
    expect(spaced.code).toBe(1)
    expectNoSecret(spaced)
  })

  it('missing headers, with a renamed look-alike named', async () => {
    const signed = await sign()
    const { 'svc-webhook-id': id, ...rest } = signed.headers
    const out = await runCli(capture({ headers: { ...rest, 'x-svc-webhook-id': id! } }, signed.rawBody))
    expect(out.stdout).toContain('refused: missing_id (a receiver answers 400)')
    expect(out.stdout).toMatch(/^missing headers:$/m)
    expect(out.stdout).toContain('x-svc-webhook-id')
    // The signature covers the id: without it, a mismatch would name a wrong cause.
    expect(out.stdout).toMatch(/^ {2}-- {4}signature {2}not run: fix "headers" first$/m)
    expect(out.stdout).not.toMatch(/^wrong secret:$/m)
    expect(out.code).toBe(1)
  })

  it('secret from --secret-file; --secret warns; usage errors exit 2', async () => {
    const signed = await sign()
    const args = capture(signed, signed.rawBody)
    const secretFile = join(dir, 'secret')
    writeFileSync(secretFile, `${SECRET}\n`)
    const fromFile = await runCli([...args, '--secret-file', secretFile], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(fromFile.code).toBe(0)
    const inline = await runCli([...args, '--secret', SECRET], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(inline.stderr).toContain('warning: --secret puts the secret in your shell history')
    expect(inline.code).toBe(0)
    expectNoSecret(inline)
    const missing = await runCli(['verify', '--body', args[4]!])
    expect(missing.stderr).toContain('give the captured request')
    expect(missing.code).toBe(2)
    const unreadable = await runCli(['verify', '--headers', join(dir, 'nope'), '--body', args[4]!])
    expect(unreadable.stderr).toContain(`--headers: file not found: ${join(dir, 'nope')}`)
    expect(unreadable.code).toBe(2)
  })
})
