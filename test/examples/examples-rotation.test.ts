/**
 * examples/rotation as its README runs it, against the service emulator (svc-webhooks/testing)
 * and a real redis-server: register.mjs registers the endpoint with its secret stored in Redis
 * (never printed), receiver.mjs takes deliveries with it, rotate.mjs rotates it while the
 * receiver keeps running, and deliveries before, during and after the rotation are processed.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process'
import { resolve } from 'node:path'
import type { Readable } from 'node:stream'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const DIR = resolve(import.meta.dirname, '../../examples/rotation')
const WAIT_MS = 15_000
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

type Child = ChildProcessByStdio<null, Readable, Readable>
const started: Child[] = []

function run(file: string, args: string[], env: Record<string, string>): { child: Child; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [file, ...args], { cwd: DIR, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  started.push(child)
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk))
  const exited = new Promise<number | null>((done) => child.once('close', (code) => done(code)))
  return { child, output: () => output, exited }
}

async function until(check: () => boolean, what: () => string): Promise<void> {
  const deadline = Date.now() + WAIT_MS
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what()}`)
    await sleep(20)
  }
}

describeWithRedis('examples/rotation', () => {
  let redis: RedisServer
  let emulator: ServiceEmulator
  beforeAll(async () => {
    redis = await startRedisServer()
    emulator = await createServiceEmulator({ retry: { firstDelayMs: 50, maxDelayMs: 500, maxAttempts: 20 } })
  })
  afterAll(async () => {
    for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await emulator?.close()
    await redis?.stop()
  })

  it('registers, receives, rotates under way, and every delivery is processed once', async () => {
    const env = { SVC_API_URL: emulator.baseUrl, SVC_API_TOKEN: emulator.token, SVC_BUSINESS_ID: emulator.businessId, REDIS_URL: redis.url }
    const port = await freePort()
    const register = run('register.mjs', [`http://127.0.0.1:${port}/webhooks/svc`], env)
    expect(await register.exited, register.output()).toBe(0)
    const endpointId = /SVC_ENDPOINT_ID=([0-9a-f-]{36})/.exec(register.output())?.[1]
    expect(endpointId, register.output()).toBeDefined()
    expect(register.output()).not.toContain('svc_whsec_')

    const receiver = run('receiver.mjs', [], { ...env, PORT: String(port), SVC_ENDPOINT_ID: endpointId!, WATCH_INTERVAL_MS: '500' })
    await until(() => receiver.output().includes('receiving on'), receiver.output)

    const sent = [emulator.send(endpointId!)]
    const rotate = run('rotate.mjs', [], { ...env, SVC_ENDPOINT_ID: endpointId!, GRACE_MS: '300' })
    for (let i = 0; i < 10; i++) {
      sent.push(emulator.send(endpointId!))
      await sleep(30)
    }
    expect(await rotate.exited, rotate.output()).toBe(0)
    expect(rotate.output()).toMatch(/rotated .*done/s)
    expect(rotate.output()).not.toContain('svc_whsec_')
    sent.push(emulator.send(endpointId!))
    await emulator.settled()

    for (const id of sent) expect(receiver.output().split(`processed message.received ${id}`).length - 1, `${id}\n${receiver.output()}`).toBe(1)
    const refusedForGood = emulator.deliveries().filter((d) => d.state !== 'delivered')
    expect(refusedForGood).toEqual([])
    receiver.child.kill('SIGTERM')
    expect(await receiver.exited).toBe(0)
  })
})
