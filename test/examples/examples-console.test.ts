/**
 * examples/console as its README runs it: a signed delivery is answered 200 and shows up in the
 * console; the console asks for credentials (401 with WWW-Authenticate, no page) and shows the
 * delivery with them; a busy port exits 1 with the reason.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer, type Server } from 'node:net'
import { resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'

const ROOT = resolve(import.meta.dirname, '../..')
const SECRET = 'svc_whsec_examples_console_tests'
const PASSWORD = 'example-password'
const children: ChildProcess[] = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill()
})

function start(port: number) {
  const child = spawn(process.execPath, ['examples/console/server.mjs'], { cwd: ROOT, env: { ...process.env, SVC_WEBHOOK_SECRET: SECRET, CONSOLE_PASSWORD: PASSWORD, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let output = ''
  child.stdout!.on('data', (d: Buffer) => (output += d))
  child.stderr!.on('data', (d: Buffer) => (output += d))
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  const line = async (pattern: RegExp) => {
    // Bounded: 15 s.
    for (let i = 0; i < 300; i++) {
      if (pattern.test(output)) return output
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`no ${pattern} in: ${output}`)
  }
  return { child, line, exited, output: () => output }
}

describe('examples/console', () => {
  it('receives, records, and shows the delivery to the operator, only with credentials', async () => {
    const port = await freePort()
    const app = start(port)
    await app.line(/console on/)
    const signed = await signWebhook({ secret: SECRET, id: 'evt_example_console_1', event: sampleEvent('message.received') })
    const res = await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.body })
    expect(res.status).toBe(200)
    const refused = await fetch(`http://127.0.0.1:${port}/admin/webhooks/history`)
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toContain('Basic')
    expect(await refused.text()).not.toContain('evt_example_console_1')
    const authorization = `Basic ${Buffer.from(`ops:${PASSWORD}`).toString('base64')}`
    const page = await fetch(`http://127.0.0.1:${port}/admin/webhooks/history`, { headers: { authorization } })
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'")
    expect(await page.text()).toContain('evt_example_console_1')
    app.child.kill('SIGTERM')
    expect(await app.exited).toBe(0)
  })

  it('exits 1 naming the port when it is busy', async () => {
    const busy: Server = createServer()
    await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done))
    const port = (busy.address() as { port: number }).port
    try {
      const app = start(port)
      expect(await app.exited).toBe(1)
      expect(app.output()).toContain(`127.0.0.1:${port}`)
    } finally {
      await new Promise((done) => busy.close(done))
    }
  })
})
