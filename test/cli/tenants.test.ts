/**
 * The CLI against one receiver of many endpoints (one secret per tenant, the tenant in the path;
 * test/support/broken-receivers.ts `startTenantReceiver`), as users run it (the built bin, a child
 * process): `send`, `verify` and `doctor` with a tenant's URL and that tenant's secret, and
 * doctor's `--other-secret` check, which passes a correct receiver and catches one that accepts
 * another tenant's signature.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ANSWERS } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { runCli, startTenantReceiver, TENANTS, type TenantReceiver } from '../support/broken-receivers.js'

const ACME = TENANTS.acme
const [GLOBEX_NEW, GLOBEX_OLD] = TENANTS.globex

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-tenants-'))
let receiver: TenantReceiver
let lax: TenantReceiver

beforeAll(async () => {
  receiver = await startTenantReceiver('multi-tenant')
  lax = await startTenantReceiver('accepts-other-tenants')
})
afterAll(async () => {
  await Promise.all([receiver?.close(), lax?.close()])
  rmSync(dir, { recursive: true, force: true })
})

/** Runs the CLI with `secret` as $SVC_WEBHOOK_SECRET, plus other variables. */
const as = (secret: string, args: string[], env: Record<string, string> = {}) => runCli(args, { env: { SVC_WEBHOOK_SECRET: secret, ...env } })

/** The doctor table rows that failed, by check name. */
function failedRows(stdout: string): string[] {
  return [...stdout.matchAll(/^\s*\d+\s+FAIL\s+(.+?)\s{2,}/gm)].map((m) => m[1]!)
}

function expectNoSecret(out: { stdout: string; stderr: string }): void {
  for (const secret of [ACME, GLOBEX_NEW, GLOBEX_OLD]) expect(out.stdout + out.stderr).not.toContain(secret.slice('svc_whsec_'.length))
}

describe('svc-webhooks send to a tenant URL', () => {
  it("the tenant's own secret is accepted there, its resend a duplicate; globex with either secret of its rotation", async () => {
    const acme = await as(ACME, ['send', receiver.url('acme'), '--resend'])
    expect(acme.stdout).toContain(`send: POST ${receiver.url('acme')}`)
    expect(acme.stdout).toMatch(/^ {2}200 OK in \d+ ms: delivered\n {2}\{"ok":true\}$/m)
    expect(acme.stdout).toMatch(/^ {2}200 OK in \d+ ms: a duplicate: delivered before, the handler did not run again\n {2}\{"ok":true,"duplicate":true\}$/m)
    expect(acme.code).toBe(0)
    for (const secret of [GLOBEX_NEW, GLOBEX_OLD]) expect((await as(secret, ['send', receiver.url('globex')])).code).toBe(0)
  })

  it("another tenant's secret is refused there: 401 invalid_signature, and the fix names the secret of the URL's endpoint", async () => {
    const out = await as(GLOBEX_NEW, ['send', receiver.url('acme')])
    expect(out.stdout).toMatch(/^ {2}401 Unauthorized in \d+ ms: a permanent refusal: the service would not retry it$/m)
    expect(out.stdout).toContain(JSON.stringify(ANSWERS.invalid_signature.body))
    expect(out.stdout).toMatch(/^ {2}invalid_signature: the receiver verifies with another secret/m)
    expect(out.stdout).toContain('On a receiver of many endpoints (one secret per tenant), that is the secret of the endpoint the URL names.')
    expect(out.code).toBe(1)
    expectNoSecret(out)
  })

  it('a tenant with no secret: 404 unknown_endpoint; a tenant whose lookup fails: 503 secret_lookup_failed, which the service retries', async () => {
    const unknown = await as(ACME, ['send', receiver.url('initech')])
    expect(unknown.stdout).toMatch(/^ {2}404 Not Found in \d+ ms: a permanent refusal: the service would not retry it$/m)
    expect(unknown.stdout).toMatch(/^ {2}unknown_endpoint: the receiver's secret lookup found no secret for this request/m)
    expect(unknown.stdout).toMatch(/^ {2}fix: check how the receiver tells endpoints apart/m)
    expect(unknown.code).toBe(1)
    const broken = await as(ACME, ['send', receiver.url('broken')])
    expect(broken.stdout).toMatch(/^ {2}503 Service Unavailable in \d+ ms: the service would retry it$/m)
    expect(broken.stdout).toMatch(/^ {2}secret_lookup_failed: the receiver's secret lookup failed/m)
    expect(broken.code).toBe(1)
  })
})

describe('svc-webhooks verify on a request captured at a tenant URL', () => {
  let request: string
  beforeAll(async () => {
    const signed = await signWebhook({ secret: ACME, event: sampleEvent('message.received') })
    const head = ['POST /tenants/acme/webhooks HTTP/1.1', 'Host: example.test', ...Object.entries(signed.headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${signed.rawBody.byteLength}`]
    request = join(dir, 'acme.http')
    writeFileSync(request, Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), Buffer.from(signed.rawBody)]))
  })

  it("verifies with the tenant's secret", async () => {
    const out = await as(ACME, ['verify', '--request', request])
    expect(out.stdout).toMatch(/^verified: delivery \S+ \(message.received, v2 signature\)$/m)
    expect(out.code).toBe(0)
  })

  it("with another tenant's secret: wrong secret, and the fix names the path the request was sent to", async () => {
    const out = await as(GLOBEX_NEW, ['verify', '--request', request])
    expect(out.stdout).toContain('refused: invalid_signature (a receiver answers 401)')
    expect(out.stdout).toMatch(/^wrong secret:$/m)
    expect(out.stdout).toContain('(it was sent to /tenants/acme/webhooks: on a receiver of many endpoints, one secret per tenant, use the secret of the endpoint that path names).')
    expect(out.code).toBe(1)
    expectNoSecret(out)
  })
})

describe('svc-webhooks doctor against a tenant URL', () => {
  it("passes each tenant's URL with that tenant's secret (exit 0, every row PASS)", async () => {
    for (const [tenant, secret] of [['acme', ACME], ['globex', GLOBEX_OLD]] as const) {
      const out = await as(secret, ['doctor', receiver.url(tenant), '--runs-url', receiver.runsUrl])
      expect(failedRows(out.stdout)).toEqual([])
      expect(out.stdout).toMatch(/\b13 passed, 0 failed\b/)
      expect(out.stdout).not.toContain("another tenant's secret")
      expect(out.code).toBe(0)
    }
  })

  it("--other-secret-env: a delivery signed with another tenant's secret is refused at this URL, as a row of its own", async () => {
    const out = await as(ACME, ['doctor', receiver.url('acme'), '--runs-url', receiver.runsUrl, '--other-secret-env', 'GLOBEX_SECRET'], { GLOBEX_SECRET: GLOBEX_NEW })
    expect(out.stdout).toContain("another tenant's secret from $GLOBEX_SECRET: must be refused at this URL")
    expect(out.stdout).toMatch(/^\s*\d+\s+PASS\s+another tenant's secret\s+4xx, not 429, no run\s+401 invalid_signature in \d+ ms, 0 runs$/m)
    expect(failedRows(out.stdout)).toEqual([])
    expect(out.stdout).toMatch(/\b14 passed, 0 failed\b/)
    expect(out.stderr).toBe('')
    expect(out.code).toBe(0)
    expectNoSecret(out)
  })

  it('--other-secret-file and --other-secret (which warns) give it too', async () => {
    const file = join(dir, 'globex-secret')
    writeFileSync(file, `${GLOBEX_OLD}\n`)
    const fromFile = await as(ACME, ['doctor', receiver.url('acme'), '--other-secret-file', file])
    expect(fromFile.stdout).toContain(`another tenant's secret from file ${file}: must be refused at this URL`)
    expect(fromFile.stdout).toMatch(/^\s*\d+\s+PASS\s+another tenant's secret\s+4xx, not 429\s+401 invalid_signature in \d+ ms$/m)
    expect(fromFile.code).toBe(0)
    const inline = await as(GLOBEX_NEW, ['doctor', receiver.url('globex'), '--other-secret', ACME])
    expect(inline.stderr).toContain('warning: --other-secret puts the secret in your shell history and the process list; prefer --other-secret-env NAME or --other-secret-file.')
    expect(inline.stdout).toMatch(/^\s*\d+\s+PASS\s+another tenant's secret\s/m)
    expect(inline.code).toBe(0)
    expectNoSecret(inline)
  })

  it("catches a receiver that accepts another tenant's signature, on that row only, with the fix", async () => {
    const out = await as(ACME, ['doctor', lax.url('acme'), '--runs-url', lax.runsUrl, '--other-secret-env', 'GLOBEX_SECRET'], { GLOBEX_SECRET: GLOBEX_OLD })
    expect(failedRows(out.stdout)).toEqual(["another tenant's secret"])
    expect(out.stdout).toMatch(/^\s*\d+\s+FAIL\s+another tenant's secret\s+4xx, not 429, no run\s+200 in \d+ ms, 1 run$/m)
    expect(out.stdout).toMatch(/another tenant's secret: accepted a delivery it must refuse: it accepts a signature made with another tenant's secret, so one tenant can post events as another\. Look the secret up/)
    expect(out.stdout).toContain("verify with that endpoint's secrets only, never every tenant's")
    expect(out.code).toBe(1)
    expectNoSecret(out)
    // Without --other-secret nothing else gives the bug away: every other row passes.
    const blind = await as(ACME, ['doctor', lax.url('acme'), '--runs-url', lax.runsUrl])
    expect(failedRows(blind.stdout)).toEqual([])
    expect(blind.code).toBe(0)
  })

  it("an --other-secret that is one of this endpoint's own secrets (a rotation) fails the row, and the fix says so", async () => {
    const out = await as(GLOBEX_NEW, ['doctor', receiver.url('globex'), '--other-secret-env', 'OLD'], { OLD: GLOBEX_OLD })
    expect(failedRows(out.stdout)).toEqual(["another tenant's secret"])
    expect(out.stdout).toContain("If --other-secret is one of this endpoint's own secrets (a rotation), pass another tenant's.")
    expect(out.code).toBe(1)
  })

  it('a tenant URL without a secret stops after the valid delivery (404 unknown_endpoint), and so does a failing lookup (503)', async () => {
    const unknown = await as(ACME, ['doctor', receiver.url('initech')])
    expect(failedRows(unknown.stdout)).toEqual(['valid delivery'])
    expect(unknown.stdout).toMatch(/^\s*1\s+FAIL\s+valid delivery\s+2xx\s+404 unknown_endpoint in \d+ ms$/m)
    expect(unknown.stdout).toMatch(/^stopped: the receiver has no secret for this URL \(404 unknown_endpoint\), so the other checks would all fail the same way: check the endpoint \(tenant\) the URL names/m)
    expect(unknown.code).toBe(1)
    const broken = await as(ACME, ['doctor', receiver.url('broken')])
    expect(failedRows(broken.stdout)).toEqual(['valid delivery'])
    expect(broken.stdout).toMatch(/^stopped: the receiver's secret lookup failed \(503 secret_lookup_failed\)/m)
    expect(broken.code).toBe(1)
  })

  it('usage errors (exit 2, nothing sent): the same secret twice, an unset variable, a file and a value at once', async () => {
    const same = await as(ACME, ['doctor', receiver.url('acme'), '--other-secret-env', 'SAME'], { SAME: ACME })
    expect(same.stderr).toContain("svc-webhooks doctor: the secret from $SAME (--other-secret) is this endpoint's own secret: give the secret of another endpoint (tenant) of the same receiver.")
    expect(same.stdout).toBe('')
    expect(same.code).toBe(2)
    const unset = await as(ACME, ['doctor', receiver.url('acme'), '--other-secret-env', 'GLOBEX_SECRET'])
    expect(unset.stderr).toContain("no secret: $GLOBEX_SECRET (named by --other-secret-env) is not set. Set GLOBEX_SECRET to another tenant's secret")
    expect(unset.code).toBe(2)
    const both = await as(ACME, ['doctor', receiver.url('acme'), '--other-secret-file', join(dir, 'x'), '--other-secret', GLOBEX_NEW])
    expect(both.stderr).toContain('give the secret one way: --other-secret-file or --other-secret, not both.')
    expect(both.code).toBe(2)
    expectNoSecret(both)
  })

  it('--help lists the --other-secret flags in their own section, with an example against a tenant URL', async () => {
    const { stdout, code } = await runCli(['doctor', '--help'])
    expect(stdout).toMatch(/^Another tenant's secret \(one receiver, many endpoints; never printed\):\n {2}--other-secret-env NAME\s+read it from this environment variable/m)
    expect(stdout).toMatch(/^ {2}--other-secret-file PATH\s/m)
    expect(stdout).toMatch(/^ {2}--other-secret VALUE\s/m)
    expect(stdout).toContain("another tenant's secret (--other-secret)")
    expect(stdout).toContain('/tenants/acme/webhooks --secret-env ACME_SECRET --other-secret-env GLOBEX_SECRET')
    expect(code).toBe(0)
  })
})
