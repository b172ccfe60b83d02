/**
 * `svc-webhooks history list | show | replay` against a real Redis: the CLI reads what a receiver
 * recorded, shows one entry (the body only with --body), replays a kept delivery through the
 * handlers of a --config module exactly once, and says "resend" when the body was not kept.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import Redis from 'ioredis'
import { createWebhookReceiver } from 'svc-webhooks'
import { RedisHistory } from 'svc-webhooks/redis'
import { signWebhook } from 'svc-webhooks/testing'
import { runCli, SECRET } from '../support/broken-receivers.js'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const ROOT = resolve(import.meta.dirname, '../..')

describeWithRedis('svc-webhooks history', () => {
  let server: RedisServer
  let client: Redis
  let dir: string
  const prefix = '{cli-history}:'
  beforeAll(async () => {
    server = await startRedisServer()
    client = new Redis(server.url)
    const kept = new RedisHistory({ client, prefix, keepBodies: true, log: false })
    const receiver = createWebhookReceiver({
      secret: SECRET,
      history: kept,
      log: false,
      on: { 'message.received': (event) => {
        if ((event as { message: { text: string } }).message.text === 'boom') throw new Error('database is down')
      } },
    })
    for (const [id, text] of [['evt_cli_ok', 'hi'], ['evt_cli_bad', 'boom']] as const) {
      const signed = await signWebhook({ secret: SECRET, id, event: { event: 'message.received', message: { id: 'm', text } } })
      await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    }
    await kept.flush()
    // One more, recorded without its body.
    const bare = new RedisHistory({ client, prefix, log: false })
    bare.record({ id: 'evt_cli_bare', endpoint: 'default', at: Date.now(), outcome: 'failed', status: 500 })
    await bare.flush()

    dir = mkdtempSync(join(tmpdir(), 'svc-history-cli-'))
    const require = createRequire(join(ROOT, 'package.json'))
    writeFileSync(join(dir, 'config.mjs'), `import Redis from ${JSON.stringify(require.resolve('ioredis'))}
import { RedisHistory } from ${JSON.stringify(join(ROOT, 'dist/redis.js'))}
import { appendFileSync } from 'node:fs'
const client = new Redis(${JSON.stringify(server.url)})
export const history = new RedisHistory({ client, prefix: ${JSON.stringify(prefix)}, log: false })
const close = history.close.bind(history)
history.close = async () => { await close(); client.disconnect() }
export const on = { 'message.received': (event, delivery) => appendFileSync(${JSON.stringify(join(dir, 'runs.txt'))}, delivery.id + '\\n') }
`)
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('lists, filters and shows; the body only with --body', async () => {
    const all = await runCli(['history', 'list', '--redis', server.url, '--prefix', prefix])
    expect(all.code).toBe(0)
    expect(all.stdout).toContain('evt_cli_ok')
    expect(all.stdout).toContain('evt_cli_bad')
    const failed = await runCli(['history', 'list', '--redis', server.url, '--prefix', prefix, '--outcome', 'failed', '--json'])
    const ids = (JSON.parse(failed.stdout) as { entries: { id: string }[] }).entries.map((e) => e.id).sort()
    expect(ids).toEqual(['evt_cli_bad', 'evt_cli_bare'])
    const shown = await runCli(['history', 'show', 'evt_cli_bad', '--redis', server.url, '--prefix', prefix])
    expect(shown.code).toBe(0)
    expect(shown.stdout).toMatch(/outcome\s+failed/)
    expect(shown.stdout).toContain('database is down')
    expect(shown.stdout).not.toContain('"text"')
    const body = await runCli(['history', 'show', 'evt_cli_bad', '--body', '--redis', server.url, '--prefix', prefix])
    expect(body.stdout).toContain('"text":"boom"')
    expect((await runCli(['history', 'show', 'nope', '--redis', server.url, '--prefix', prefix])).code).toBe(1)
    expect((await runCli(['history', 'list'])).code).toBe(2)
  })

  it('replays a kept delivery once through the --config handlers; a body not kept points to the resend', async () => {
    const replayed = await runCli(['history', 'replay', 'evt_cli_bad', '--config', join(dir, 'config.mjs')])
    expect(replayed.stderr).toBe('')
    expect(replayed.code).toBe(0)
    expect(replayed.stdout).toMatch(/^processed: evt_cli_bad/)
    const { readFileSync } = await import('node:fs')
    expect(readFileSync(join(dir, 'runs.txt'), 'utf8')).toBe('evt_cli_bad\n')
    const entry = await new RedisHistory({ client, prefix, log: false }).get('evt_cli_bad')
    expect(entry).toMatchObject({ outcome: 'processed', replays: 1 })
    const bare = await runCli(['history', 'replay', 'evt_cli_bare', '--config', join(dir, 'config.mjs')])
    expect(bare.code).toBe(1)
    expect(bare.stderr).toContain('resend')
  })
})
