/**
 * The servers `bench/http.mjs` measures, one per process: `<runtime> bench/http-servers.mjs
 * <server> <mode>`. Prints one JSON line `{"port": n}` once listening on 127.0.0.1 and exits when
 * its stdin closes. Modes, for each server:
 * - `bare`: reads the body and answers `{"ok":true}`: the framework's own cost.
 * - `floor`: `bare` plus what any verifying receiver must do: the v2 HMAC over the raw bytes, a
 *   constant-time compare and JSON.parse, the HMAC in the cheapest way known (bench/floor.mjs).
 * - `webhooks`: the package's entry for that server, with a MemoryStore and an empty handler.
 * - `forged`: the same entry (its default log on stderr), for the forged deliveries bench/http.mjs sends it.
 * - `telemetry`: the same entry with `telemetry: openTelemetry()` over a recording SDK.
 * - `telemetry-als`: `telemetry` with the AsyncLocalStorage context manager registered, as
 *   `NodeSDK` (`NodeTracerProvider.register()`) does by default in a Node app.
 * - `telemetry-sdk`: the same SDK called directly, the fewest calls that record what
 *   `openTelemetry()` records (a span with the same attributes, a counter add and two histogram
 *   records with a fresh attribute object): the SDK's own cost, to read the package's against.
 * Servers: express, hono (@hono/node-server), fastify, node (node:http), and fetch (Bun.serve or
 * Deno.serve, when this file runs under Bun or Deno).
 */
import { Buffer } from 'node:buffer'
import { hmacFloor } from './floor.mjs'

export const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
export const PATH = '/webhooks/svc'

const args = globalThis.Deno ? globalThis.Deno.args : process.argv.slice(2)
const [server, mode] = args
const checkHmac = hmacFloor(SECRET)
const on = { 'message.received': () => {} }
const OK = '{"ok":true}'
// The package's entry, whether it is sent genuine deliveries or forged ones, with or without telemetry.
const receiving = mode === 'webhooks' || mode === 'forged' || mode.startsWith('telemetry')

/**
 * The `telemetry` modes' option: `openTelemetry()` over a recording SDK (every span sampled and
 * batched to an exporter that drops them; every metric aggregated, by a reader that a production
 * app's periodic one would collect every 60 s), the cost a production app pays. `telemetry-als`
 * also registers the AsyncLocalStorage context manager, as `NodeSDK` does: then every promise in
 * the process, the server's and the framework's too, carries the active context.
 */
async function extra() {
  if (!mode.startsWith('telemetry')) return {}
  if (mode === 'telemetry-als') {
    const { context } = await import('@opentelemetry/api')
    const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks')
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  }
  const { BasicTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-base')
  const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics')
  const { openTelemetry } = await import('svc-webhooks/opentelemetry')
  const drop = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} }
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(drop)] })
  class Reader extends MetricReader {
    async onShutdown() {}
    async onForceFlush() {}
  }
  const meterProvider = new MeterProvider({ readers: [new Reader()] })
  return { telemetry: mode === 'telemetry-sdk' ? await bareSdk(tracerProvider, meterProvider) : openTelemetry({ tracerProvider, meterProvider }) }
}

/** `telemetry-sdk`: the SDK calls a hand-written telemetry needs for the same span and metrics. */
async function bareSdk(tracerProvider, meterProvider) {
  const { SpanKind, SpanStatusCode } = await import('@opentelemetry/api')
  const tracer = tracerProvider.getTracer('svc-webhooks')
  const meter = meterProvider.getMeter('svc-webhooks')
  const deliveries = meter.createCounter('svc_webhooks.deliveries')
  const handlerDuration = meter.createHistogram('svc_webhooks.handler.duration')
  const verificationDuration = meter.createHistogram('svc_webhooks.verification.duration')
  const start = { 'messaging.system': 'svc-webhooks', 'messaging.operation.type': 'receive', 'messaging.operation.name': 'receive' }
  const scope = (span) => {
    const started = performance.now()
    let verifiedAt
    let handlerMs
    return {
      verified: () => void (verifiedAt ??= performance.now()),
      run(fn) {
        const t = performance.now()
        const value = fn()
        handlerMs = performance.now() - t
        return value
      },
      traceparent: () => undefined,
      end(result) {
        const failed = result.status >= 300
        const attributes = { 'messaging.operation.type': 'receive', 'svc_webhooks.outcome': result.outcome, 'http.response.status_code': result.status }
        if (result.code !== undefined) attributes['svc_webhooks.code'] = result.code
        if (result.endpoint !== undefined) attributes['messaging.destination.name'] = result.endpoint
        if (failed) attributes['error.type'] = result.code ?? result.outcome
        span.setAttributes({ ...attributes, 'messaging.message.id': result.id, 'svc_webhooks.event_type': result.eventType })
        span.updateName(`receive ${result.endpoint}`)
        if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: result.code ?? result.outcome })
        span.end()
        deliveries.add(1, attributes)
        if (verifiedAt !== undefined) verificationDuration.record((verifiedAt - started) / 1000, attributes)
        if (handlerMs !== undefined) handlerDuration.record(handlerMs / 1000, attributes)
      },
    }
  }
  return {
    receive: () => scope(tracer.startSpan('receive', { kind: SpanKind.CONSUMER, attributes: start })),
    process: () => scope(tracer.startSpan('process', { kind: SpanKind.CONSUMER })),
  }
}

/** The floor's work on a body and its headers (a `get(name)` function): throws when it fails. */
function floor(body, get) {
  if (!checkHmac(`${get('svc-webhook-id')}.${get('svc-webhook-timestamp')}.`, body, get('svc-webhook-signature-v2'))) {
    throw new Error('bench: signature mismatch')
  }
  return JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'))
}

/** Reads a Node request's body with data events (what a hand-written node:http route does). */
function readNode(req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    req.on('data', (chunk) => chunks.push(chunk))
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

async function listenNode(handler) {
  const { createServer } = await import('node:http')
  const s = createServer(handler)
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve))
  return s.address().port
}

async function start() {
  if (server === 'express') {
    const { default: express } = await import('express')
    const app = express()
    if (mode === 'bare') app.post(PATH, express.raw({ type: '*/*' }), (req, res) => res.type('json').send(OK))
    else if (mode === 'floor') {
      app.post(PATH, express.raw({ type: '*/*' }), (req, res) => {
        floor(req.body, (name) => req.headers[name])
        res.type('json').send(OK)
      })
    } else {
      const { webhooks } = await import('svc-webhooks/express')
      app.post(PATH, webhooks({ secret: SECRET, on, ...(await extra()) }))
    }
    return listenNode(app)
  }
  if (server === 'hono') {
    const { Hono } = await import('hono')
    const { serve } = await import('@hono/node-server')
    const app = new Hono()
    if (mode === 'bare') app.post(PATH, async (c) => (await c.req.arrayBuffer(), c.body(OK, 200, { 'content-type': 'application/json' })))
    else if (mode === 'floor') {
      app.post(PATH, async (c) => {
        floor(new Uint8Array(await c.req.arrayBuffer()), (name) => c.req.header(name))
        return c.body(OK, 200, { 'content-type': 'application/json' })
      })
    } else {
      const { webhooks } = await import('svc-webhooks/hono')
      app.post(PATH, webhooks({ secret: SECRET, on, ...(await extra()) }))
    }
    return new Promise((resolve) => serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port)))
  }
  if (server === 'fastify') {
    const { default: Fastify } = await import('fastify')
    const app = Fastify()
    if (receiving) {
      const { webhooksPlugin } = await import('svc-webhooks/fastify')
      await app.register(webhooksPlugin, { path: PATH, secret: SECRET, on, ...(await extra()) })
    } else {
      app.removeAllContentTypeParsers()
      app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
      app.post(PATH, async (request, reply) => {
        if (mode === 'floor') floor(request.body, (name) => request.headers[name])
        return reply.type('application/json').send(OK)
      })
    }
    await app.listen({ port: 0, host: '127.0.0.1' })
    return app.server.address().port
  }
  if (server === 'node') {
    if (receiving) {
      const { createNodeHandler } = await import('svc-webhooks/node')
      return listenNode(createNodeHandler({ secret: SECRET, on, ...(await extra()) }))
    }
    return listenNode(async (req, res) => {
      const body = await readNode(req)
      if (mode === 'floor') floor(body, (name) => req.headers[name])
      res.writeHead(200, { 'content-type': 'application/json' }).end(OK)
    })
  }
  if (server === 'fetch') {
    let fetch
    if (receiving) {
      const { createFetchHandler } = await import('svc-webhooks/fetch')
      fetch = createFetchHandler({ secret: SECRET, on, ...(await extra()) })
    } else {
      fetch = async (request) => {
        const body = new Uint8Array(await request.arrayBuffer())
        if (mode === 'floor') floor(body, (name) => request.headers.get(name))
        return new Response(OK, { headers: { 'content-type': 'application/json' } })
      }
    }
    if (globalThis.Bun) return globalThis.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch }).port
    if (globalThis.Deno) {
      return new Promise((resolve) => globalThis.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: ({ port }) => resolve(port) }, fetch))
    }
    throw new Error('bench: the fetch server runs under Bun or Deno')
  }
  throw new Error(`bench: unknown server ${server}`)
}

const port = await start()
console.log(JSON.stringify({ port }))
// The parent holds our stdin open: when it ends (the parent stopped us or died), exit.
if (globalThis.Deno) {
  for await (const _ of globalThis.Deno.stdin.readable);
  globalThis.Deno.exit(0)
} else {
  process.stdin.resume()
  process.stdin.on('end', () => process.exit(0))
}
