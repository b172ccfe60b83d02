/**
 * `svc-webhooks send` and `sign` as users run them (the built bin, a child process) against a
 * correct receiver on 127.0.0.1 built on the installed package.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyWebhook } from 'svc-webhooks'
import { CLI, runCli, SECRET, startReceiver, type Receiver } from '../support/broken-receivers.js'

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
    // The resend's answer is read as what it is: not a second delivery.
    const resend = out.stdout.slice(out.stdout.indexOf('resend: POST'))
    expect(resend).toMatch(/^ {2}200 OK in \d+ ms: a duplicate: delivered before, the handler did not run again$/m)
    expect(resend).not.toMatch(/ms: delivered$/m)
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

  it('a refusal is printed with its code and the one cause: a sample refused 401 is another secret, not a re-serialized body', async () => {
    const out = await runCli(['send', receiver.url], { env: { SVC_WEBHOOK_SECRET: 'svc_whsec_another-endpoints-secret' } })
    expect(out.stdout).toContain('401 Unauthorized')
    expect(out.stdout).toMatch(/^ {2}invalid_signature: the receiver verifies with another secret than the one this command signs with$/m)
    expect(out.stdout).toMatch(/^ {2}fix: give both the endpoint's current secret/m)
    expect(out.stdout).not.toContain('before express.json()')
    expect(out.stdout + out.stderr).not.toContain('another-endpoints-secret')
    expect(out.code).toBe(1)
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
    expect(down.stdout).toContain(`nothing is listening at ${new URL(gone.url).host}: is the server running, and on this port?`)
    expect(down.code).toBe(1)
    expect((await runCli(['send', 'ftp://127.0.0.1/x'])).code).toBe(2)
    const noScheme = await runCli(['send', 'localhost:3000/webhooks/svc'])
    expect(noScheme.stderr).toContain('must start with http:// or https://. Add the scheme: "http://localhost:3000/webhooks/svc".')
    expect(noScheme.code).toBe(2)
    const noSecret = await runCli(['send', receiver.url], { env: { SVC_WEBHOOK_SECRET: undefined } })
    expect(noSecret.stderr).toContain('no secret')
    expect(noSecret.code).toBe(2)
  })
})

describe('svc-webhooks send names the one cause', () => {
  let misspelled: Receiver
  beforeAll(async () => {
    misspelled = await startReceiver('misspelled-on')
  })
  afterAll(async () => {
    await misspelled.close()
  })

  it('a sample answered 200 ignored (a misspelled `on` key) is a warning that names the key, not "delivered"', async () => {
    const out = await runCli(['send', misspelled.url])
    expect(out.stdout).toMatch(/^ {2}200 OK in \d+ ms: delivered, but ignored: the receiver ran no handler for it$/m)
    expect(out.stdout).toMatch(/^ {2}warning: no handler for message\.received in `on`: misspelled key\?$/m)
    expect(out.stdout).not.toMatch(/ms: delivered$/m)
    expect(out.code).toBe(0) // the sender reads a 2xx as delivered: a warning, not a failure
  })

  it('an event type outside the catalog answered ignored is expected: no warning', async () => {
    const out = await runCli(['send', receiver.url, '--event', 'template.approved'])
    expect(out.stdout).toContain('{"ok":true,"ignored":true}')
    expect(out.stdout).not.toContain('warning')
    expect(out.code).toBe(0)
  })

  it("a wrong path (the framework's 404 page) gets a route hint, not \"a permanent refusal\"", async () => {
    const out = await runCli(['send', receiver.url.replace('/webhooks/svc', '/webhook/svc')])
    expect(out.stdout).toMatch(/^ {2}404 Not Found in \d+ ms: not delivered: nothing at this URL took the delivery/m)
    expect(out.stdout).toContain('fix: check the path (and the method, POST) the webhook route is mounted on')
    expect(out.stdout).not.toContain('a permanent refusal')
    expect(out.stdout).not.toContain('<!DOCTYPE html>')
    expect(out.code).toBe(1)
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

  it('the sign example runs the local install (npx svc-webhooks), and --resend says it sends twice', async () => {
    const sign = (await runCli(['sign', '--help'])).stdout
    expect(sign).toContain('$(npx svc-webhooks sign --body event.json)')
    expect(sign).not.toMatch(/\$\(svc-webhooks /)
    const send = (await runCli(['send', '--help'])).stdout
    expect(send).toMatch(/--resend\s+two POSTs: the delivery, then the same bytes again under the same id with\s+a new timestamp/)
  })
})

describe('the command line', () => {
  it('an unknown option names the option and the command, then shows the usage (exit 2)', async () => {
    const out = await runCli(['send', 'http://127.0.0.1:9/webhooks/svc', '--x'])
    expect(out.stderr).toMatch(/^unknown option --x for `svc-webhooks send`\n\nUsage: svc-webhooks send <url> \[options\]\n/)
    expect(out.stderr).toMatch(/^ {2}--resend {13}/m)
    expect(out.stderr).not.toMatch(/To specify a positional argument|ERR_PARSE_ARGS/)
    expect(out.stdout).toBe('')
    expect(out.code).toBe(2)
  })

  it('a flag without its value, a value on a boolean, an extra argument (exit 2)', async () => {
    const missing = await runCli(['send', 'http://127.0.0.1:9/', '--id'])
    expect(missing.stderr).toMatch(/^--id needs a value for `svc-webhooks send`: --id ID\n/)
    const swallowed = await runCli(['send', 'http://127.0.0.1:9/', '--id', '--resend'])
    expect(swallowed.stderr).toMatch(/^--id needs a value/)
    const valued = await runCli(['send', 'http://127.0.0.1:9/', '--resend=yes'])
    expect(valued.stderr).toMatch(/^--resend takes no value for `svc-webhooks send`/)
    const extra = await runCli(['sign', 'event.json'])
    expect(extra.stderr).toMatch(/^unexpected argument "event.json" for `svc-webhooks sign` \(it takes none\)/)
    for (const out of [missing, swallowed, valued, extra]) expect(out.code).toBe(2)
  })

  it('a secret pasted where an argument goes is not echoed', async () => {
    for (const args of [['sign', SECRET], ['send', SECRET], ['send', 'http://127.0.0.1:9/', '--timeout', SECRET]]) {
      const out = await runCli(args, { input: '{}' })
      expect(out.stderr).toContain('(a value that looks like a secret, not shown)')
      expect(out.stdout + out.stderr).not.toContain(SECRET)
      expect(out.code).toBe(2)
    }
  })

  it('--version prints the version in the package.json next to dist, from any directory and through a bin link', async () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string }
    const out = await runCli(['--version'])
    expect(out.stdout).toBe(`${version}\n`)
    expect(out.code).toBe(0)
    // As npm installs it: node_modules/.bin/svc-webhooks is a link to dist/cli.js, run from elsewhere.
    const bin = join(dir, 'node_modules', '.bin')
    mkdirSync(bin, { recursive: true })
    symlinkSync(CLI, join(bin, 'svc-webhooks'))
    expect(execFileSync(process.execPath, [join(bin, 'svc-webhooks'), '--version'], { cwd: dir, encoding: 'utf8', stdio: 'pipe' })).toBe(`${version}\n`)
  })

  it('--secret-env names the variable it read; a value that is not a variable name is not echoed', async () => {
    const nope = await runCli(['send', receiver.url, '--secret-env', 'NOPE'])
    expect(nope.stderr).toContain('no secret: $NOPE (named by --secret-env) is not set. Set NOPE')
    expect(nope.stderr).not.toContain('SVC_WEBHOOK_SECRET')
    expect(nope.code).toBe(2)
    const pasted = await runCli(['send', receiver.url, '--secret-env', SECRET])
    expect(pasted.stderr).toContain('--secret-env takes the name of an environment variable')
    expect(pasted.stderr).not.toContain(SECRET)
    expect(pasted.code).toBe(2)
  })

  it('--secret-file that does not exist: file not found, with its path', async () => {
    const missing = join(dir, 'no-such-secret')
    const out = await runCli(['send', receiver.url, '--secret-file', missing])
    expect(out.stderr).toContain(`--secret-file: file not found: ${missing}`)
    expect(out.code).toBe(2)
  })
})
