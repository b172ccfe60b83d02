/**
 * examples/inbox-order/bot.mjs runs as a user runs it (`node bot.mjs` with REDIS_URL at a real
 * redis-server on 127.0.0.1): paused through its admin route, it answers five messages of one
 * conversation 202 though they arrive newest first; resumed, it answers them oldest first, #1 to
 * #5, and a message older than one already answered is marked late; SIGTERM exits 0.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const ROOT = resolve(import.meta.dirname, '../..')
const SECRET = 'svc_whsec_examples_order_tests'
const CONVERSATION = 'c0a80000-0000-4000-8000-00000000beef'
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

describeWithRedis('examples/inbox-order: a reply bot that keeps the conversation order', () => {
  let redis: RedisServer
  let child: ChildProcess | undefined
  const lines: string[] = []
  let port = 0
  beforeAll(async () => {
    redis = await startRedisServer()
    port = await freePort()
    child = spawn(process.execPath, ['bot.mjs'], {
      cwd: join(ROOT, 'examples', 'inbox-order'),
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', SVC_WEBHOOK_SECRET: SECRET, REDIS_URL: redis.url, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (data: Buffer) => lines.push(...String(data).split('\n').filter(Boolean)))
    await until(() => lines.some((line) => line.includes('Reply bot receiving')))
  }, 30_000)
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await redis?.stop()
  })

  async function until(check: () => boolean, ms = 15_000): Promise<void> {
    for (let waited = 0; waited < ms; waited += 20) {
      if (check()) return
      await sleep(20)
    }
    throw new Error(`timed out; output:\n${lines.join('\n')}`)
  }

  async function send(index: number): Promise<number> {
    const base = sampleEvent('message.received')
    const event = { ...base, conversation_id: CONVERSATION, message: { ...base.message, id: crypto.randomUUID(), text: `message ${index}`, created_at: `2026-05-01T10:00:0${index}.000000+00:00` } }
    const signed = await signWebhook({ secret: SECRET, event })
    return (await fetch(`http://127.0.0.1:${port}/webhooks/svc`, { method: 'POST', body: signed.body, headers: signed.headers })).status
  }

  const answered = () => lines.filter((line) => line.startsWith(`conversation ${CONVERSATION}`))

  it('answers one conversation oldest first, whatever the arrival order; a late one is marked', async () => {
    const paused = await (await fetch(`http://127.0.0.1:${port}/admin/pause?by=the%20test`, { method: 'POST' })).json()
    expect(paused).toMatchObject({ paused: true, pausedBy: 'the test' })
    for (const index of [5, 4, 3, 2, 1]) expect(await send(index)).toBe(202)
    // The bot logs the pause once it sees the flag (at its next poll), with who paused.
    await until(() => lines.some((line) => line.includes('paused by the test')))
    await sleep(300)
    expect(answered()).toEqual([])
    expect(await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()).toMatchObject({ depth: 5, paused: true })
    await fetch(`http://127.0.0.1:${port}/admin/resume`, { method: 'POST' })
    await until(() => answered().length === 5)
    expect(answered().map((line) => /"(message \d)"/.exec(line)?.[1])).toEqual(['message 1', 'message 2', 'message 3', 'message 4', 'message 5'])
    expect(answered().map((line) => / #(\d) /.exec(line)?.[1])).toEqual(['1', '2', '3', '4', '5'])
    // Older than message 5, already answered: still answered, marked late.
    expect(await send(0)).toBe(202)
    await until(() => answered().length === 6)
    expect(answered()[5]).toMatch(/"message 0".*\[late/)
  }, 30_000)

  it('SIGTERM stops it gracefully (exit 0)', async () => {
    const exited = new Promise<number | null>((done) => child!.once('exit', (code) => done(code)))
    child!.kill('SIGTERM')
    expect(await exited).toBe(0)
  }, 30_000)
})
