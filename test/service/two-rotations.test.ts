/**
 * Two processes rotating one endpoint's secret at once (two operators, two cron hosts), each a
 * child process running rotateEndpointSecret from the built package on one real redis-server,
 * against the service emulator. The first process's rotation acts at the service first but its
 * answer comes back last (the emulator holds it): the source must end holding the secret the
 * service signs with, nothing pending, and a receiver on it must verify every delivery after.
 */
import { spawn } from 'node:child_process'
import { join, resolve } from 'node:path'
import { expect, it } from 'vitest'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { createNodeHandler } from 'svc-webhooks/node'
import { createServiceClient } from 'svc-webhooks/service'
import { createServiceEmulator } from 'svc-webhooks/testing'
import { describeWithRedis } from '../support/services.js'
import { listen } from '../support/servers.js'
import { useRedisServer } from '../support/redis.js'

const ROOT = resolve(import.meta.dirname, '../..')
const ROTATE = join(ROOT, 'test/support/lifecycle/rotate.mjs')

/** Runs one rotating process to its end; resolves its one line of output. */
function rotateInChild(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [ROTATE], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk))
  const killer = setTimeout(() => child.kill('SIGKILL'), 20_000)
  return new Promise((done) => child.once('exit', () => (clearTimeout(killer), done(output.trim()))))
}

describeWithRedis('two rotating processes at once', () => {
  const redis = useRedisServer()

  it('the source ends with the secret the service signs with, nothing pending; every delivery after is verified', async () => {
    const emulator = await createServiceEmulator({ retry: { firstDelayMs: 20, maxDelayMs: 100, maxAttempts: 5 } })
    const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
    const source = new RedisSecretSource({ client: redis.client, key: 'two-rotations:secret' })
    const runs: string[] = []
    const server = await listen(createNodeHandler({ secret: source, secretRereadMs: 20, log: false, on: { 'message.received': (_e, d) => void runs.push(d.id) } }))
    try {
      const created = await service.endpoints.create({ label: 'two rotations', url: server.url, subscribed_events: [] })
      await source.write({ secrets: [created.signing_secret] })
      const env = {
        ROT_REDIS_URL: redis.server.url,
        ROT_KEY: 'two-rotations:secret',
        ROT_API: JSON.stringify({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId, endpointId: created.id }),
      }
      // The first rotate-secret to arrive acts at once and is answered 1.5 s late.
      emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 1_500 })
      const first = rotateInChild(env)
      for (let i = 0; i < 200 && !emulator.apiCalls().some((c) => c.path.endsWith('/rotate-secret')); i++) await new Promise((done) => setTimeout(done, 20))
      const second = rotateInChild(env)
      const outputs = await Promise.all([first, second])
      expect(outputs).toEqual([`ROTATED ${created.id}`, `ROTATED ${created.id}`])
      expect(emulator.apiCalls().filter((c) => c.path.endsWith('/rotate-secret'))).toHaveLength(2)

      const state = await source.read()
      expect(state.secrets).toContain(emulator.secretOf(created.id))
      expect(state.pending ?? []).toEqual([])
      const sent = Array.from({ length: 5 }, () => emulator.send(created.id))
      await emulator.settled()
      const states = emulator.deliveries().filter((d) => sent.includes(d.id)).map((d) => d.state)
      console.log(`two rotations at once: source holds ${state.secrets.length} secrets, service's current among them; deliveries after: ${states.join(', ')}`)
      expect(states).toEqual(Array(5).fill('delivered'))
      expect(runs.filter((id) => sent.includes(id))).toHaveLength(5)
    } finally {
      await server.close()
      await emulator.close()
    }
  })
})
