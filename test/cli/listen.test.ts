/**
 * `svc-webhooks listen` against the package's service emulator, with a real local receiver that
 * reads its secret from the file `listen` writes (FileSecretSource): the endpoint is registered
 * for the tunnel's URL (here the forwarder's own 127.0.0.1 port, which the emulator accepts), a
 * delivery reaches the receiver through the forwarder and is printed as it arrives, and the
 * endpoint and the secret file are gone after Ctrl-C (SIGINT), SIGTERM, --timeout and a crash (an
 * uncaught exception or an unhandled rejection raised inside the running process by a preloaded
 * module); an endpoint the service refuses to delete is named with the command that deletes it;
 * one left by a SIGKILL is deleted by the next run for the same URL. The token never appears.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createNodeHandler } from 'svc-webhooks/node'
import { createServiceClient, FileSecretSource } from 'svc-webhooks/service'
import { createServiceEmulator, type ServiceEmulator } from 'svc-webhooks/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort } from '../../tools/free-port.mjs'
import { CLI } from '../support/broken-receivers.js'

let emulator: ServiceEmulator
let receiver: Server
let receiverUrl: string
let dir: string
const secretFile = () => join(dir, 'secret.json')
let runs = 0

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-listen-'))
  emulator = await createServiceEmulator({ retry: { firstDelayMs: 5, maxDelayMs: 20, maxAttempts: 3 } })
  const handle = createNodeHandler({ secret: new FileSecretSource({ path: secretFile() }), on: { 'message.received': async () => void runs++ }, log: false })
  receiver = createServer(handle)
  await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done))
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/svc`
})

afterAll(async () => {
  await emulator?.close()
  receiver?.close()
  rmSync(dir, { recursive: true, force: true })
})

/** The service's settings, as a user exports them; nothing else of this process's environment. */
function serviceEnv(): NodeJS.ProcessEnv {
  const env: Record<string, string | undefined> = { PATH: process.env.PATH, SVC_API_URL: emulator.baseUrl, SVC_API_TOKEN: emulator.token, SVC_BUSINESS_ID: emulator.businessId }
  return env as NodeJS.ProcessEnv
}

/**
 * Loaded before the CLI with --require: a crash on demand inside the running `listen`, the way a
 * bug would raise one. SIGUSR2 throws from a timer; SIGHUP leaves a promise rejected.
 */
const CRASH_PRELOAD = `
process.on('SIGUSR2', () => setImmediate(() => { throw new Error('injected crash') }))
process.on('SIGHUP', () => { Promise.reject(new Error('injected rejection')) })
`

/** Starts `listen` and resolves once it says it is listening (bounded: 20 s). */
async function startListen(args: string[], nodeArgs: string[] = []) {
  const child = spawn(process.execPath, [...nodeArgs, CLI, 'listen', ...args, '--secret-file', secretFile()], {
    env: serviceEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  for (let i = 0; i < 200 && !output.includes('listening;'); i++) {
    if (child.exitCode !== null) break
    await new Promise((done) => setTimeout(done, 100))
  }
  expect(output, output).toContain('listening;')
  const id = /endpoint (\S+) registered/.exec(output)![1]!
  return { child, exited, output: () => output, id }
}

describe('svc-webhooks listen', () => {
  it('registers an endpoint, forwards and prints a delivery, and deletes the endpoint on Ctrl-C', async () => {
    const port = await freePort()
    const run = await startListen(['--url', `http://127.0.0.1:${port}/webhooks/svc`, '--port', String(port), '--forward-to', receiverUrl])
    expect(emulator.endpoint(run.id)).toMatchObject({ url: `http://127.0.0.1:${port}/webhooks/svc`, enabled: true })
    expect(existsSync(secretFile())).toBe(true)

    const delivery = emulator.send(run.id)
    await emulator.settled()
    expect(emulator.deliveries().find((d) => d.id === delivery)?.state).toBe('delivered')
    expect(runs).toBe(1)
    // The line reaches this process through a pipe, after the answer reached the emulator.
    const line = new RegExp(`${delivery}  message\\.received  200 in \\d+ ms`)
    for (let i = 0; i < 50 && !line.test(run.output()); i++) await new Promise((done) => setTimeout(done, 100))
    expect(run.output()).toMatch(line)

    run.child.kill('SIGINT')
    expect(await run.exited, run.output()).toBe(0)
    expect(run.output()).toContain(`stopped (SIGINT): endpoint ${run.id} deleted`)
    expect(emulator.endpoint(run.id)).toBeUndefined()
    expect(existsSync(secretFile())).toBe(false)
    expect(run.output()).not.toContain(emulator.token)
  }, 60_000)

  it('deletes the endpoint when --timeout passes', async () => {
    const run = await startListen(['--url', 'http://127.0.0.1:9/webhooks/svc', '--timeout', '1'])
    expect(emulator.endpoint(run.id)).toBeDefined()
    expect(await run.exited, run.output()).toBe(0)
    expect(run.output()).toContain(`stopped after --timeout 1 s: endpoint ${run.id} deleted`)
    expect(emulator.endpoint(run.id)).toBeUndefined()
    expect(run.output()).not.toContain(emulator.token)
  }, 60_000)

  it('deletes the endpoint on SIGTERM', async () => {
    const run = await startListen(['--url', 'http://127.0.0.1:9/webhooks/svc'])
    run.child.kill('SIGTERM')
    expect(await run.exited, run.output()).toBe(0)
    expect(run.output()).toContain(`stopped (SIGTERM): endpoint ${run.id} deleted`)
    expect(emulator.endpoint(run.id)).toBeUndefined()
    expect(existsSync(secretFile())).toBe(false)
  }, 60_000)

  it.each([
    ['an uncaught exception', 'SIGUSR2', 'injected crash'],
    ['an unhandled rejection', 'SIGHUP', 'injected rejection'],
  ] as const)('deletes the endpoint when it crashes with %s, and exits 1', async (_, signal, message) => {
    const preload = join(dir, 'crash.cjs')
    writeFileSync(preload, CRASH_PRELOAD)
    const run = await startListen(['--url', 'http://127.0.0.1:9/webhooks/svc'], ['--require', preload])
    expect(emulator.endpoint(run.id)).toBeDefined()
    run.child.kill(signal)
    expect(await run.exited, run.output()).toBe(1)
    expect(run.output()).toContain(`svc-webhooks listen: ${message}`)
    expect(run.output()).toContain(`crashed: endpoint ${run.id} deleted`)
    expect(emulator.endpoint(run.id)).toBeUndefined()
    expect(existsSync(secretFile())).toBe(false)
    expect(run.output()).not.toContain(emulator.token)
  }, 60_000)

  it('names the command that deletes the endpoint when the service refuses to, and exits 1', async () => {
    const run = await startListen(['--url', 'http://127.0.0.1:9/webhooks/svc'])
    emulator.faultApiCalls(1, { method: 'DELETE', status: 403 })
    run.child.kill('SIGINT')
    expect(await run.exited, run.output()).toBe(1)
    expect(run.output()).toContain(`endpoint ${run.id} could not be deleted`)
    expect(run.output()).toContain(`svc-webhooks endpoints delete ${run.id}`)
    expect(emulator.endpoint(run.id)).toBeDefined()
    expect(run.output()).not.toContain(emulator.token)
    await createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId }).endpoints.remove(run.id)
    expect(emulator.endpoint(run.id)).toBeUndefined()
  }, 60_000)

  it('deletes the endpoint a SIGKILLed run left for the same URL when the next run starts', async () => {
    const url = 'http://127.0.0.1:9/webhooks/killed'
    const killed = await startListen(['--url', url])
    killed.child.kill('SIGKILL')
    await killed.exited
    expect(emulator.endpoint(killed.id)).toBeDefined()

    const next = await startListen(['--url', url, '--timeout', '1'])
    expect(next.output()).toContain(`endpoint ${killed.id} deleted: an earlier listen for ${url} stopped without deleting it`)
    expect(emulator.endpoint(killed.id)).toBeUndefined()
    expect(next.id).not.toBe(killed.id)
    expect(await next.exited, next.output()).toBe(0)
    expect(emulator.endpoint(next.id)).toBeUndefined()
  }, 60_000)

  it('a service URL the client refuses (a remote http:// one) is a usage error, exit 2, before any call', async () => {
    const child = spawn(process.execPath, [CLI, 'listen', '--url', 'https://tunnel.example/webhooks/svc'], { env: { ...serviceEnv(), SVC_API_URL: 'http://api.example.com' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    expect(await new Promise((done) => child.once('exit', done)), err).toBe(2)
    expect(err).toMatch(/https/)
    expect(err).not.toContain(emulator.token)
  })

  it('refuses a public URL that is not https, before calling the service', async () => {
    const child = spawn(process.execPath, [CLI, 'listen', '--url', 'http://example.com/webhooks/svc'], { env: serviceEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    expect(await new Promise((done) => child.once('exit', done))).toBe(2)
    expect(err).toContain('--url must be https')
  })
})
