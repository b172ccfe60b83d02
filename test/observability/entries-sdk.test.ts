/**
 * `openTelemetry()` with the real OpenTelemetry SDK (an InMemorySpanExporter, a MeterProvider
 * read on demand) through every Node server entry: Express, Fastify, node:http, Hono on
 * @hono/node-server and the Fetch handler over real HTTP on 127.0.0.1, and the Lambda handler
 * with an HTTP API event. Each gets one processed delivery, its resend (a duplicate) and a forged
 * one (refused), and must report one CONSUMER receive span per request with the messaging
 * attributes and the status it answered, and the deliveries counter by outcome. The case table
 * (test/support/case-app.ts) checks the entries against a recording fake; this is the same path
 * through the SDK users install.
 */
import { getRequestListener } from '@hono/node-server'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { afterAll, describe, expect, it } from 'vitest'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks as expressWebhooks } from 'svc-webhooks/express'
import { webhooksPlugin } from 'svc-webhooks/fastify'
import { createFetchHandler } from 'svc-webhooks/fetch'
import { webhooks as honoWebhooks } from 'svc-webhooks/hono'
import { webhooks as lambdaWebhooks } from 'svc-webhooks/lambda'
import { createNodeHandler } from 'svc-webhooks/node'
import { openTelemetry, type WebhookTelemetry } from 'svc-webhooks/opentelemetry'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { eventOf } from '../support/lambda-events.js'
import { listen } from '../support/servers.js'

const SECRET = 'svc_whsec_EntriesSdkSecretQ2hhbmdlTWUxxxx'
const FORGER = 'svc_whsec_NotTheSendersSecretQ2hhbmdlTWU'
const PATH = '/webhooks/svc'

class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** The receiver options every entry gets: one handler, the SDK's telemetry, no log lines. */
interface EntryOptions {
  secret: string
  on: WebhookHandlers
  telemetry: WebhookTelemetry
  log: false
}

/** An entry serving `options` on PATH: `send` posts a signed delivery and resolves the status answered. */
interface Entry {
  send(signed: SignedWebhook): Promise<number>
  close(): Promise<void>
}

/** Over real HTTP to a server on 127.0.0.1. */
function overHttp(url: string, close: () => Promise<void>): Entry {
  return {
    send: async (signed) => {
      const res = await fetch(url + PATH, { method: 'POST', headers: signed.headers, body: signed.body })
      await res.arrayBuffer()
      return res.status
    },
    close,
  }
}

const ENTRIES: Record<string, (options: EntryOptions) => Promise<Entry>> = {
  async 'svc-webhooks/express'(options) {
    const app = express()
    app.post(PATH, expressWebhooks(options))
    const server = await listen(app)
    return overHttp(server.url, server.close)
  },
  async 'svc-webhooks/fastify'(options) {
    const app = Fastify()
    await app.register(webhooksPlugin, { path: PATH, ...options })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    return overHttp(url, () => app.close())
  },
  async 'svc-webhooks/node'(options) {
    const handle = createNodeHandler(options)
    const server = await listen((req, res) => void handle(req, res))
    return overHttp(server.url, server.close)
  },
  async 'svc-webhooks/hono on @hono/node-server'(options) {
    const app = new Hono()
    app.post(PATH, honoWebhooks(options))
    const server = await listen(getRequestListener(app.fetch))
    return overHttp(server.url, server.close)
  },
  async 'svc-webhooks/fetch on @hono/node-server'(options) {
    const server = await listen(getRequestListener(createFetchHandler(options)))
    return overHttp(server.url, server.close)
  },
  async 'svc-webhooks/lambda (HTTP API event)'(options) {
    const handler = lambdaWebhooks(options)
    return {
      send: async (signed) => (await handler(eventOf('http-api-v2', { body: signed.rawBody, headers: signed.headers, path: PATH }))).statusCode,
      close: async () => undefined,
    }
  },
}

const open: Entry[] = []
afterAll(async () => {
  await Promise.all(open.map((entry) => entry.close()))
})

describe('openTelemetry() with the real SDK on every Node server entry', () => {
  it.each(Object.keys(ENTRIES))('%s: a processed delivery, its duplicate and a forged one: a receive span each, the deliveries counted by outcome', async (name) => {
    const exporter = new InMemorySpanExporter()
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const reader = new TestReader()
    const telemetry = openTelemetry({ tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) })
    const handled: string[] = []
    const entry = await ENTRIES[name]!({ secret: SECRET, log: false, telemetry, on: { 'message.received': (_event, delivery) => void handled.push(delivery.id) } })
    open.push(entry)

    const delivery = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
    const forged = await signWebhook({ secret: FORGER, event: sampleEvent('message.received') })
    expect(await entry.send(delivery)).toBe(200)
    expect(await entry.send(delivery)).toBe(200)
    expect(await entry.send(forged)).toBe(401)
    expect(handled).toEqual([delivery.id])

    const spans = exporter.getFinishedSpans()
    // A refused delivery's span keeps the bare name: a refusal names no endpoint (its endpoint is
    // only looked up, best effort, when `endpoint` is a function of the request).
    expect(spans.map((span) => span.name)).toEqual(['receive default', 'receive default', 'receive'])
    for (const span of spans) {
      expect(span.kind).toBe(SpanKind.CONSUMER)
      expect(span.attributes).toMatchObject({ 'messaging.system': 'svc-webhooks', 'messaging.operation.type': 'receive', 'messaging.operation.name': 'receive' })
    }
    const [processed, duplicate, refused] = spans
    expect(processed!.attributes).toMatchObject({
      'messaging.message.id': delivery.id,
      'messaging.destination.name': 'default',
      'http.response.status_code': 200,
      'svc_webhooks.outcome': 'processed',
      'svc_webhooks.event_type': 'message.received',
    })
    expect(processed!.status.code).toBe(SpanStatusCode.UNSET)
    expect(duplicate!.attributes).toMatchObject({ 'messaging.message.id': delivery.id, 'messaging.destination.name': 'default', 'http.response.status_code': 200, 'svc_webhooks.outcome': 'duplicate' })
    expect(duplicate!.status.code).toBe(SpanStatusCode.UNSET)
    // The id as sent (a well-formed header), never verified.
    expect(refused!.attributes).toMatchObject({
      'messaging.message.id': forged.id,
      'http.response.status_code': 401,
      'svc_webhooks.outcome': 'refused',
      'svc_webhooks.code': 'invalid_signature',
      'error.type': 'invalid_signature',
    })
    expect(refused!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'invalid_signature' })

    const { resourceMetrics, errors } = await reader.collect()
    expect(errors).toEqual([])
    const deliveries = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === 'svc_webhooks.deliveries')
    const byOutcome = Object.fromEntries(deliveries!.dataPoints.map((point) => [`${point.attributes['svc_webhooks.outcome']} ${point.attributes['http.response.status_code']}`, point.value]))
    expect(byOutcome).toEqual({ 'processed 200': 1, 'duplicate 200': 1, 'refused 401': 1 })
  })
})
