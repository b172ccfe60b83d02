/**
 * The example servers in examples/ (Express, Fastify, Hono, node:http, Bun, Deno) as their READMEs
 * run them: on a free port each prints the URL it listens on and answers a signed delivery 200;
 * on a busy port each says which port it could not listen on and exits 1, instead of printing
 * "receiving" and exiting 0 (Express 5 hands the listen error to the callback, not to a throw).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { afterAll, describe, expect } from 'vitest'
import { itNeeding } from '../support/services.js'

const root = resolve(import.meta.dirname, '../..')
const secret = 'svc_whsec_examples-test'
const work = mkdtempSync(join(tmpdir(), 'svc-webhooks-examples-'))
// Bun applies the cwd's tsconfig.json `paths` at run time; the repository's point at src/ for the
// type checker, so Bun gets a tsconfig without them and loads the built package.
const bunTsconfig = join(work, 'tsconfig.json')
writeFileSync(bunTsconfig, '{}\n')
const bun = join(root, 'scripts/runtime-binaries/node_modules/@oven/bun-linux-x64/bin/bun')
const deno = join(root, 'scripts/runtime-binaries/node_modules/@deno/linux-x64-glibc/deno')

interface Example {
  name: string
  binary: string
  args: string[]
}

const EXAMPLES: Example[] = [
  ...['express', 'fastify', 'hono', 'koa', 'node'].map((name) => ({ name, binary: process.execPath, args: [`examples/${name}/server.mjs`] })),
  { name: 'bun', binary: bun, args: [`--tsconfig-override=${bunTsconfig}`, 'examples/bun/server.ts'] },
  {
    name: 'deno',
    binary: deno,
    args: ['run', '--node-modules-dir=manual', '--no-lock', '--allow-net=127.0.0.1', '--allow-env=SVC_WEBHOOK_SECRET,PORT', '--allow-read=.', 'examples/deno/server.ts'],
  },
]

const children: ChildProcess[] = []
const occupied: Server[] = []
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill()
  await Promise.all(occupied.map((server) => new Promise((done) => server.close(done))))
  rmSync(work, { recursive: true, force: true })
})

interface Run {
  child: ChildProcess
  /** Everything printed so far, stdout and stderr. */
  output: () => string
  exited: Promise<number | null>
}

function run(example: Example, port: number): Run {
  const child = spawn(example.binary, example.args, {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SVC_WEBHOOK_SECRET: secret, PORT: String(port) },
  })
  children.push(child)
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  return { child, output: () => out, exited }
}

/** Resolves with the URL the example prints, or rejects if it exits or stays silent for 30 s. */
function listening({ child, output, exited }: Run): Promise<string> {
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`no URL within 30 s:\n${output()}`)), 30_000)
    const look = () => {
      const match = /receiving on (http:\/\/127\.0\.0\.1:\d+\/webhooks\/svc)/.exec(output())
      if (match) {
        clearTimeout(timer)
        done(match[1]!)
      }
    }
    child.stdout!.on('data', look)
    child.stderr!.on('data', look)
    void exited.then((code) => {
      clearTimeout(timer)
      fail(new Error(`exited ${code} before listening:\n${output()}`))
    })
  })
}

/** A port some other server holds, on every interface. */
async function busyPort(): Promise<number> {
  const server = createServer()
  occupied.push(server)
  await new Promise<void>((done, fail) => {
    server.once('error', fail)
    server.listen(0, () => done())
  })
  return (server.address() as { port: number }).port
}

/** Bun and Deno come from scripts/runtime-binaries, which .ci/run installs before `npm test`. */
const needs = itNeeding

describe.each(EXAMPLES)('examples/$name', (example) => {
  needs(example.binary)('on a free port: prints its URL and answers a signed delivery 200', async () => {
    const started = run(example, 0)
    const url = await listening(started)
    expect(url).not.toMatch(/:0\//) // the port it got, not the 0 it was given
    const signed = await signWebhook({ secret, event: sampleEvent('message.received') })
    const res = await fetch(url, { method: 'POST', body: signed.body, headers: signed.headers })
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { ok: true } })
    started.child.kill()
  }, 60_000)

  needs(example.binary)('on a busy port: names the port and exits 1', async () => {
    const port = await busyPort()
    const started = run(example, port)
    const code = await Promise.race([started.exited, new Promise((done) => setTimeout(() => done('still running after 30 s'), 30_000))])
    expect(code, started.output()).toBe(1)
    expect(started.output()).toContain(`cannot listen on 127.0.0.1:${port}`)
    expect(started.output()).not.toContain('receiving on')
  }, 60_000)
})
