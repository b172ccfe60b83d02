/**
 * `svc-webhooks endpoints ...` as users run it (the built bin, a child process) against the
 * service emulator over real HTTP: list, create (the secret shown once, or written to a 0600
 * file), update, enable, disable, delete, rotate, status (exit 1 when disabled), and resend
 * --from-log with the refusal lines a real receiver wrote; the token never in the output.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createNodeHandler } from 'svc-webhooks/node'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'
import { runCli } from '../support/broken-receivers.js'

const TOKEN = 'svc_pat_cli_endpoint_tests_never_print'
const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-endpoints-'))
let emulator: ServiceEmulator
let env: Record<string, string>

const cli = (...args: string[]) => runCli(['endpoints', ...args], { env })
const expectNoToken = (out: { stdout: string; stderr: string }) => expect(out.stdout + out.stderr).not.toContain(TOKEN)

beforeAll(async () => {
  emulator = await createServiceEmulator({ token: TOKEN, disableAfter: 2, retry: { firstDelayMs: 1, maxDelayMs: 2 } })
  env = { SVC_API_URL: emulator.baseUrl, SVC_API_TOKEN: TOKEN, SVC_BUSINESS_ID: emulator.businessId }
})
afterAll(async () => {
  await emulator.close()
  rmSync(dir, { recursive: true, force: true })
})

async function createOne(url: string, ...flags: string[]): Promise<{ id: string; signing_secret: string }> {
  const out = await cli('create', '--url', url, '--json', ...flags)
  expect(out.code, out.stderr).toBe(0)
  return JSON.parse(out.stdout) as { id: string; signing_secret: string }
}

describe('svc-webhooks endpoints', () => {
  it('create shows the secret once; list and status show the endpoint without it', async () => {
    const out = await cli('create', '--url', 'https://shop.example.com/webhooks/svc', '--label', 'shop', '--events', 'message.received')
    expect(out.code, out.stderr).toBe(0)
    const id = /^created endpoint (\S+)$/m.exec(out.stdout)![1]!
    const secret = emulator.secretOf(id)
    expect(out.stdout).toContain(`shown this once`)
    expect(out.stdout.split(secret)).toHaveLength(2)

    const list = await cli('list')
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(/^ID\s+ENABLED\s+FAILURES\s+EVENTS\s+URL\s+LABEL$/m)
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+yes\\s+0\\s+message.received\\s+https://shop.example.com/webhooks/svc\\s+shop$`, 'm'))
    expect(list.stdout).not.toContain(secret)

    const status = await cli('status', id)
    expect(status.code).toBe(0)
    expect(status.stdout).toMatch(/^ {2}enabled\s+yes$/m)
    expect(status.stdout).toMatch(/^ {2}consecutive_failures\s+0 /m)
    expect(status.stdout).toMatch(/^ {2}last_error\s+none$/m)
    expect(status.stdout).toMatch(/^ {2}last_delivery_at\s+never$/m)
    const json = JSON.parse((await cli('status', id, '--json')).stdout) as Record<string, unknown>
    expect(json).toMatchObject({ id, enabled: true, consecutive_failures: 0, last_error: null })
    expect(json).not.toHaveProperty('signing_secret')
    expectNoToken(out)
  })

  it('create and rotate --write-secret-file: written with mode 0600, not printed', async () => {
    const file = join(dir, 'secret')
    const out = await cli('create', '--url', 'https://a.example.com/hook', '--write-secret-file', file)
    expect(out.code, out.stderr).toBe(0)
    const id = /^created endpoint (\S+)$/m.exec(out.stdout)![1]!
    expect(readFileSync(file, 'utf8')).toBe(emulator.secretOf(id))
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(out.stdout + out.stderr).not.toContain(emulator.secretOf(id))

    const first = emulator.secretOf(id)
    const rotated = await cli('rotate', id, '--write-secret-file', file)
    expect(rotated.code, rotated.stderr).toBe(0)
    expect(emulator.secretOf(id)).not.toBe(first)
    expect(readFileSync(file, 'utf8')).toBe(emulator.secretOf(id))
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(rotated.stdout + rotated.stderr).not.toContain(emulator.secretOf(id))

    // A directory that cannot take the file: refused before the service is called.
    const before = emulator.secretOf(id)
    const bad = await cli('rotate', id, '--write-secret-file', join(dir, 'missing', 'secret'))
    expect(bad.code).toBe(2)
    expect(emulator.secretOf(id)).toBe(before)
  })

  it('rotate prints the new secret once; update, disable, enable, delete', async () => {
    const { id, signing_secret } = await createOne('https://b.example.com/hook')
    const rotated = await cli('rotate', id)
    expect(rotated.code).toBe(0)
    const secret = emulator.secretOf(id)
    expect(secret).not.toBe(signing_secret)
    expect(rotated.stdout.split(secret)).toHaveLength(2)
    expect(rotated.stdout).toContain('the old one stopped verifying now')

    const updated = await cli('update', id, '--label', 'renamed', '--events', '', '--json')
    expect(JSON.parse(updated.stdout)).toMatchObject({ id, label: 'renamed', subscribed_events: [] })
    expect((await cli('update', id)).code).toBe(2)

    expect(JSON.parse((await cli('disable', id, '--json')).stdout)).toMatchObject({ enabled: false })
    expect(JSON.parse((await cli('enable', id, '--json')).stdout)).toMatchObject({ enabled: true })
    const deleted = await cli('delete', id)
    expect([deleted.code, deleted.stdout]).toEqual([0, `deleted endpoint ${id}\n`])
    const gone = await cli('status', id)
    expect(gone.code).toBe(1)
    expect(gone.stderr).toContain('no endpoint')
  })

  it('status of an endpoint the service disabled: exit 1, with last_error', async () => {
    const down = createServer()
    await new Promise<void>((done) => down.listen(0, '127.0.0.1', done))
    const port = (down.address() as AddressInfo).port
    await new Promise((done) => down.close(done))
    const { id } = await createOne(`http://127.0.0.1:${port}/`)
    emulator.send(id)
    await emulator.settled()
    const status = await cli('status', id)
    expect(status.code).toBe(1)
    expect(status.stdout).toMatch(/^ {2}enabled\s+no$/m)
    expect(status.stdout).toMatch(/^ {2}consecutive_failures\s+2 /m)
    expect(status.stdout).toMatch(/^ {2}last_error\s+ECONNREFUSED$/m)
    expect(status.stdout).toContain(`svc-webhooks endpoints enable ${id}`)
  })

  it('errors: a 422 lists the fields (exit 1); a missing setting or a bad id is a usage error (exit 2)', async () => {
    const invalid = await cli('create', '--url', 'https://c.example.com/', '--events', 'message.recieved')
    expect(invalid.code).toBe(1)
    expect(invalid.stderr).toMatch(/422 validation_error/)
    expect(invalid.stderr).toMatch(/^ {2}body\.subscribed_events\.0: Unknown event type/m)

    const noToken = await runCli(['endpoints', 'list'], { env: { ...env, SVC_API_TOKEN: '' } })
    expect([noToken.code, noToken.stderr]).toEqual([2, expect.stringContaining('set SVC_API_TOKEN')])
    const noUrl = await runCli(['endpoints', 'list'], { env: { ...env, SVC_API_URL: '' } })
    expect([noUrl.code, noUrl.stderr]).toEqual([2, expect.stringContaining('SVC_API_URL')])
    expect((await cli('status', 'not-a-uuid')).code).toBe(2)
    expect((await cli('frobnicate')).code).toBe(2)
    expect((await cli('list', '--nope')).stderr).toContain('unknown option --nope for `svc-webhooks endpoints list`')
    for (const action of ['list', 'create', 'update', 'enable', 'disable', 'delete', 'rotate', 'resend', 'status']) {
      const help = await cli(action, '--help')
      expect(help.stdout).toMatch(new RegExp(`^Usage: svc-webhooks endpoints ${action}`))
      expect(help.code).toBe(0)
    }
  })

  it('the token is never printed: a refused token with --verbose, and a network failure', async () => {
    const refused = await runCli(['endpoints', 'list', '--verbose'], { env: { ...env, SVC_API_TOKEN: `${TOKEN}_wrong` } })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^> GET \/api\/v1\/webhook-endpoints \(attempt 1\): 401 in \d+ ms$/m)
    expect(refused.stderr).toContain('401 unauthorized')
    expectNoToken(refused)
    const verbose = await cli('list', '--verbose')
    expect(verbose.code).toBe(0)
    expectNoToken(verbose)
  })
})

describe('svc-webhooks endpoints resend --from-log', () => {
  let server: Server
  let secrets: Record<string, string>
  const processed: string[] = []
  const logged: string[] = []

  beforeAll(async () => {
    secrets = {}
    // One receiver, two tenants by path; its refusal lines are what --from-log reads.
    const handle = createNodeHandler({
      secret: (req) => secrets[(req.url ?? '').split('/')[2] ?? ''] ?? [],
      endpoint: (req) => (req.url ?? '').split('/')[2] ?? '',
      log: (line) => void logged.push(line),
      on: { 'message.received': (_event, delivery) => void processed.push(delivery.id) },
    })
    server = createServer(handle)
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  })
  afterAll(() => new Promise<void>((done) => server.close(() => done())))

  it('refused deliveries, resent once the secret is right: each processed once; ids deduped', async () => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`
    const shop = await createOne(`${base}/shop`)
    const cafe = await createOne(`${base}/cafe`)
    // A wrong secret deployed for both tenants: every delivery is refused 401, which the sender drops.
    secrets = { shop: 'svc_whsec_wrong_one', cafe: 'svc_whsec_wrong_two' }
    const refused = [emulator.send(shop.id), emulator.send(cafe.id)]
    await emulator.settled()
    expect(emulator.deliveries().filter((d) => refused.includes(d.id)).map((d) => d.state)).toEqual(['dropped', 'dropped'])
    const lines = logged.filter((l) => l.includes('invalid_signature'))
    expect(lines).toHaveLength(2)

    const log = join(dir, 'receiver.log')
    // As a log file holds them: prefixed by the logger, repeated, among other lines.
    writeFileSync(log, [...lines, 'unrelated line', ...lines.map((l) => `2026-01-01T00:00:00Z WARN ${l}`), ''].join('\n'))
    const dry = await cli('resend', '--from-log', log, '--dry-run')
    expect(dry.stdout.trim().split('\n').sort()).toEqual([...refused].sort())

    secrets = { shop: shop.signing_secret, cafe: cafe.signing_secret }
    const out = await cli('resend', '--from-log', log)
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout).toContain('2 resent, 0 failed')
    await emulator.settled()
    expect(processed.sort()).toEqual([...refused].sort())

    // Resent again by id: the receiver deduplicates, nothing runs twice.
    const again = await cli('resend', ...refused)
    expect(again.code).toBe(0)
    await emulator.settled()
    expect(processed).toHaveLength(2)
  })

  it('a delivery the service does not know is reported, exit 1; a log naming none is exit 1', async () => {
    const unknown = crypto.randomUUID()
    const out = await cli('resend', unknown, '--json')
    expect(out.code).toBe(1)
    expect(JSON.parse(out.stdout)).toEqual([{ id: unknown, ok: false, status: 404, code: 'not_found', error: expect.any(String) }])
    const empty = join(dir, 'empty.log')
    writeFileSync(empty, 'nothing here\n')
    expect((await cli('resend', '--from-log', empty)).code).toBe(1)
  })

  it('summary lines of collapsed repeats: every id they list is taken, and those past the cap are said to be missing', async () => {
    const [a, b, c] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
    const log = join(dir, 'collapsed.log')
    writeFileSync(
      log,
      [
        `svc-webhooks: 401 invalid_signature (delivery ${a}, endpoint shop): the signature does not match.`,
        `svc-webhooks: 401 invalid_signature, endpoint shop: 14 more in the last 10 s, delivery ids ${b} not-a-uuid ${c} (and 11 not listed). Each one is counted in stats() and passed to onResult.`,
        `svc-webhooks: 503 store_unavailable (delivery ${crypto.randomUUID()}): the idempotency store did not answer`,
        JSON.stringify({ outcome: 'refused', status: 401, code: 'invalid_signature', id: a }),
      ].join('\n'),
    )
    const out = await cli('resend', '--from-log', log, '--dry-run')
    expect(out.stdout.trim().split('\n')).toEqual([a, b, c])
    expect(out.stderr).toContain('11 more refusals were counted in summary lines past the ids they list')
  })
})
