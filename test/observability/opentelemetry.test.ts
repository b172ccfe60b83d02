/**
 * `svc-webhooks/opentelemetry` with the real OpenTelemetry SDK: the receive span and its
 * attributes (messaging conventions), its parent under an active span, the handler's spans as its
 * children, the metrics by outcome and status, the gauges, and nothing secret in any attribute.
 * The Prometheus scrape goes over real HTTP on 127.0.0.1 through the exporter's own server.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { context, trace, SpanStatusCode } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics'
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { createWebhookReceiver, MemoryInbox, type WebhookReceiverOptions } from 'svc-webhooks'
import { openTelemetry } from 'svc-webhooks/opentelemetry'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { freePort } from '../../tools/free-port.mjs'

const SECRET = 'svc_whsec_TelemetryTestSecretQ2hhbmdlTWU'
const OTHER = 'svc_whsec_SomeoneElsesSecretQ2hhbmdlTWUx'
const MARKER = 'body-marker-7f3a'

class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const exporter = new InMemorySpanExporter()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const contextManager = new AsyncLocalStorageContextManager()

beforeAll(() => {
  contextManager.enable()
  context.setGlobalContextManager(contextManager)
})
afterAll(() => {
  context.disable()
})
afterEach(() => exporter.reset())

function setup(options: Partial<WebhookReceiverOptions> = {}) {
  const reader = new TestReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const telemetry = openTelemetry({ tracerProvider, meterProvider })
  const receiver = createWebhookReceiver({ secret: SECRET, log: false, on: { 'message.received': () => undefined }, telemetry, ...options })
  return { receiver, reader, telemetry }
}

async function request(secret = SECRET, id?: string, text = MARKER) {
  const event = sampleEvent('message.received')
  event.message.text = text
  const signed = await signWebhook({ secret, event, ...(id ? { id } : {}) })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers, signed }
}

async function collect(reader: MetricReader): Promise<ResourceMetrics> {
  const { resourceMetrics, errors } = await reader.collect()
  expect(errors).toEqual([])
  return resourceMetrics
}

function metric(resource: ResourceMetrics, name: string) {
  return resource.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === name)
}

/** Every attribute value of a span, its events included, as text. */
function attributeText(span: ReadableSpan): string {
  return JSON.stringify([span.name, span.attributes, span.events, span.status])
}

describe('openTelemetry() on the receiver', () => {
  it('a processed delivery: one CONSUMER receive span with the messaging attributes, status unset', async () => {
    const { receiver } = setup()
    const { signed, ...req } = await request()
    const answer = await receiver.handle(req)
    expect(answer.status).toBe(200)
    const spans = exporter.getFinishedSpans()
    expect(spans).toHaveLength(1)
    const span = spans[0]!
    expect(span.name).toBe('receive default')
    expect(span.attributes).toMatchObject({
      'messaging.system': 'svc-webhooks',
      'messaging.operation.type': 'receive',
      'messaging.operation.name': 'receive',
      'messaging.message.id': signed.id,
      'messaging.destination.name': 'default',
      'http.response.status_code': 200,
      'svc_webhooks.outcome': 'processed',
      'svc_webhooks.event_type': 'message.received',
    })
    expect(span.status.code).toBe(SpanStatusCode.UNSET)
  })

  it('a refusal: error status with the answer code, and no secret, signature or body anywhere', async () => {
    const { receiver } = setup()
    const { signed, ...req } = await request(OTHER)
    const answer = await receiver.handle(req)
    expect(answer.status).toBe(401)
    const [span] = exporter.getFinishedSpans()
    expect(span!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'invalid_signature' })
    expect(span!.attributes).toMatchObject({ 'error.type': 'invalid_signature', 'svc_webhooks.code': 'invalid_signature', 'http.response.status_code': 401 })
    const text = attributeText(span!)
    const signature = String(signed.headers['svc-webhook-signature-v2']).slice(3)
    for (const secret of [SECRET, OTHER, signature, MARKER]) expect(text).not.toContain(secret)
  })

  it('under an active span (an HTTP server span), the receive span is its child; the handler runs inside it', async () => {
    let handlerParent: string | undefined
    const handlerTracer = tracerProvider.getTracer('app')
    const { receiver } = setup({
      on: {
        'message.received': async () => {
          const span = handlerTracer.startSpan('save message')
          handlerParent = (span as unknown as ReadableSpan).parentSpanContext?.spanId
          span.end()
        },
      },
    })
    const server = tracerProvider.getTracer('http').startSpan('POST /webhooks/svc')
    const { signed: _signed, ...req } = await request()
    await context.with(trace.setSpan(context.active(), server), () => receiver.handle(req))
    server.end()
    const receive = exporter.getFinishedSpans().find((s) => s.name.startsWith('receive'))!
    expect(receive.parentSpanContext?.spanId).toBe(server.spanContext().spanId)
    expect(receive.spanContext().traceId).toBe(server.spanContext().traceId)
    expect(handlerParent).toBe(receive.spanContext().spanId)
  })

  it('metrics: deliveries by outcome and status, verification and handler durations, the failing streak', async () => {
    const { receiver, reader } = setup({
      on: {
        'message.received': (event) => {
          if (event.message.text === 'fail') throw new Error('failing on purpose')
        },
      },
    })
    const { signed: _a, ...good } = await request()
    await receiver.handle(good)
    await receiver.handle(good) // the same id again: duplicate
    for (let i = 0; i < 3; i++) {
      const { signed: _b, ...bad } = await request(OTHER)
      await receiver.handle(bad)
    }
    // A verified delivery whose handler fails: the streak counts it (forged refusals do not).
    const { signed: _c, ...failing } = await request(SECRET, undefined, 'fail')
    await receiver.handle(failing)
    const resource = await collect(reader)
    const deliveries = metric(resource, 'svc_webhooks.deliveries')!
    const counts = Object.fromEntries(deliveries.dataPoints.map((p) => [`${p.attributes['svc_webhooks.outcome']} ${p.attributes['http.response.status_code']}`, p.value]))
    expect(counts).toEqual({ 'processed 200': 1, 'duplicate 200': 1, 'refused 401': 3, 'handler_failed 500': 1 })
    const verification = metric(resource, 'svc_webhooks.verification.duration')!
    expect(verification.dataPoints.reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(6)
    const handler = metric(resource, 'svc_webhooks.handler.duration')!
    expect(handler.dataPoints.reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(2)
    const streak = metric(resource, 'svc_webhooks.failing_streak')!
    expect(streak.dataPoints.map((p) => p.value)).toEqual([1])
  })

  it('deliveries counted between collections reach every reader, cumulative, with the same attribute sets', async () => {
    const first = new TestReader()
    const second = new TestReader()
    const meterProvider = new MeterProvider({ readers: [first, second] })
    const receiver = createWebhookReceiver({ secret: SECRET, log: false, on: { 'message.received': () => undefined }, telemetry: openTelemetry({ tracerProvider, meterProvider }) })
    const send = async (secret: string) => {
      const { signed: _s, ...req } = await request(secret)
      return (await receiver.handle(req)).status
    }
    const counts = (resource: ResourceMetrics) =>
      Object.fromEntries(metric(resource, 'svc_webhooks.deliveries')!.dataPoints.map((p) => [`${p.attributes['svc_webhooks.outcome']} ${p.attributes['http.response.status_code']} ${p.attributes['error.type'] ?? '-'}`, p.value]))
    expect([await send(SECRET), await send(OTHER)]).toEqual([200, 401])
    expect(counts(await collect(first))).toEqual({ 'processed 200 -': 1, 'refused 401 invalid_signature': 1 })
    expect([await send(SECRET), await send(SECRET)]).toEqual([200, 200])
    expect(counts(await collect(second))).toEqual({ 'processed 200 -': 3, 'refused 401 invalid_signature': 1 })
    expect(counts(await collect(first))).toEqual({ 'processed 200 -': 3, 'refused 401 invalid_signature': 1 })
    // Counts and histogram observations agree.
    const verification = metric(await collect(second), 'svc_webhooks.verification.duration')!
    expect(verification.dataPoints.reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(4)
  })

  it('past the attribute sets it keeps (endpoints by the thousand), deliveries are still counted, each with its own set', async () => {
    const reader = new TestReader()
    const telemetry = openTelemetry({ tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) })
    const endpoints = 1_050
    for (let i = 0; i < endpoints; i++) {
      const scope = telemetry.receive()
      scope.verified()
      scope.end({ outcome: 'processed', status: 200, endpoint: `tenant-${i}`, id: `evt_${i}` })
    }
    const last = telemetry.receive()
    last.end({ outcome: 'processed', status: 200, endpoint: `tenant-${endpoints - 1}` })
    const points = metric(await collect(reader), 'svc_webhooks.deliveries')!.dataPoints
    expect(points).toHaveLength(endpoints)
    expect(points.reduce((n, p) => n + (p.value as number), 0)).toBe(endpoints + 1)
    expect(points.find((p) => p.attributes['messaging.destination.name'] === `tenant-${endpoints - 1}`)!.value).toBe(2)
    expect(points.find((p) => p.attributes['messaging.destination.name'] === 'tenant-0')!.value).toBe(1)
    const verification = metric(await collect(reader), 'svc_webhooks.verification.duration')!.dataPoints
    expect(verification.reduce((n, p) => n + (p.value as { count: number }).count, 0)).toBe(endpoints) // the last scope was never verified
    exporter.reset()
  })

  it('every delivery’s durations are recorded with their values, many deliveries to one attribute set', async () => {
    const reader = new TestReader()
    const telemetry = openTelemetry({ tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) })
    const deliver = (n: number, handler: () => unknown) => {
      for (let i = 0; i < n; i++) {
        const scope = telemetry.receive()
        scope.verified()
        scope.run(handler)
        scope.end({ outcome: 'processed', status: 200, endpoint: 'default', id: `evt_${i}` })
      }
    }
    const handlers = (resource: ResourceMetrics) => metric(resource, 'svc_webhooks.handler.duration')!.dataPoints[0]!.value as { count: number; sum: number; max?: number }
    deliver(150, () => undefined)
    let resource = await collect(reader)
    expect(metric(resource, 'svc_webhooks.deliveries')!.dataPoints.map((p) => p.value)).toEqual([150])
    expect((metric(resource, 'svc_webhooks.verification.duration')!.dataPoints[0]!.value as { count: number }).count).toBe(150)
    expect(handlers(resource).count).toBe(150)
    // A handler that takes 20 ms: its duration is recorded as measured.
    deliver(1, () => {
      const until = performance.now() + 20
      while (performance.now() < until);
    })
    resource = await collect(reader)
    expect(handlers(resource).count).toBe(151)
    expect(handlers(resource).max).toBeGreaterThanOrEqual(0.02)
    expect(handlers(resource).max).toBeLessThan(1)
    exporter.reset()
  })

  it('inbox gauges: depth, oldest age, retrying, dead, paused and the rate limit from the receiver’s inbox', async () => {
    const inbox = new MemoryInbox()
    const { receiver, reader } = setup({ inbox, on: undefined })
    for (let i = 0; i < 2; i++) {
      const { signed: _s, ...req } = await request()
      expect((await receiver.handle(req)).status).toBe(202)
    }
    const resource = await collect(reader)
    expect(metric(resource, 'svc_webhooks.inbox.depth')!.dataPoints.map((p) => p.value)).toEqual([2])
    expect(metric(resource, 'svc_webhooks.inbox.dead')!.dataPoints.map((p) => p.value)).toEqual([0])
    // Flow control: paused (0 or 1) from the engine's flag, the shared rate once a worker set one.
    expect(metric(resource, 'svc_webhooks.inbox.paused')!.dataPoints.map((p) => p.value)).toEqual([0])
    await inbox.admit(1, { perSecond: 25, burst: 3 })
    await inbox.setPause(true, 'ops')
    const paused = await collect(reader)
    expect(metric(paused, 'svc_webhooks.inbox.paused')!.dataPoints.map((p) => p.value)).toEqual([1])
    expect(metric(paused, 'svc_webhooks.inbox.rate_limit')!.dataPoints.map((p) => p.value)).toEqual([25])
    const span = exporter.getFinishedSpans()[0]!
    expect(span.attributes['svc_webhooks.outcome']).toBe('accepted')
    expect(span.attributes['http.response.status_code']).toBe(202)
  })

  it('the accepted delivery carries the receive span’s trace context into the inbox', async () => {
    const inbox = new MemoryInbox()
    const { receiver } = setup({ inbox, on: undefined })
    const { signed: _s, ...req } = await request()
    await receiver.handle(req)
    const [entry] = await inbox.take(1, 60_000)
    const span = exporter.getFinishedSpans()[0]!
    expect(entry!.traceparent).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`)
  })

  it('invalid telemetry is a startup error', () => {
    expect(() => createWebhookReceiver({ secret: SECRET, on: {}, telemetry: {} as never })).toThrow(/telemetry/)
  })
})

describe('Prometheus scrape through @opentelemetry/exporter-prometheus', () => {
  let prometheus: PrometheusExporter
  let port: number
  beforeAll(async () => {
    port = await freePort()
    prometheus = new PrometheusExporter({ host: '127.0.0.1', port })
    await prometheus.startServer()
  })
  afterAll(() => prometheus.shutdown())

  it('the counters and histograms are readable over HTTP on 127.0.0.1', async () => {
    const meterProvider = new MeterProvider({ readers: [prometheus] })
    const receiver = createWebhookReceiver({
      secret: SECRET,
      log: false,
      on: {
        'message.received': (event) => {
          if (event.message.text === 'fail') throw new Error('failing on purpose')
        },
      },
      telemetry: openTelemetry({ tracerProvider, meterProvider }),
    })
    const { signed: _a, ...good } = await request()
    await receiver.handle(good)
    const { signed: _b, ...bad } = await request(OTHER)
    await receiver.handle(bad)
    const { signed: _c, ...failing } = await request(SECRET, undefined, 'fail')
    await receiver.handle(failing)
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    expect(text).toMatch(/svc_webhooks_deliveries_total\{[^}]*svc_webhooks_outcome="processed"[^}]*\} 1/)
    expect(text).toMatch(/svc_webhooks_deliveries_total\{[^}]*http_response_status_code="401"[^}]*\} 1/)
    expect(text).toMatch(/svc_webhooks_verification_duration_count\{[^}]*svc_webhooks_outcome="processed"[^}]*\} 1/)
    expect(text).toMatch(/svc_webhooks_failing_streak\{[^}]*\} 1/)
    expect(text).toMatch(/svc_webhooks_verification_duration_bucket\{[^}]*le="0.001"[^}]*\} 1/)
    expect(text).not.toContain(SECRET)
  })
})
