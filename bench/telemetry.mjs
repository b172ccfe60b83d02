/**
 * `node bench/telemetry.mjs [--als]`: in process, the CPU a delivery's telemetry costs with a
 * recording SDK (BatchSpanProcessor to an exporter that drops, a MeterProvider whose reader
 * collects at the end of each round, as a periodic one would): `openTelemetry()`'s
 * receive/verified/run/end against the SDK calls that record the same span and metrics directly
 * (bench/http-servers.mjs `telemetry-sdk`), and the span and the three metric records alone.
 * Each case has its own SDK and runs 2,000 deliveries per round (fewer than the batch processor's
 * queue of 2,048: none is dropped), the cases in an order that rotates every round, the event loop
 * turning between them (the batch processor exports), for 30 rounds; the figure is the least CPU
 * per delivery seen (the machine's noise only ever adds). `--als` registers the
 * AsyncLocalStorage context manager first, as NodeSDK does.
 */
import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { openTelemetry } from 'svc-webhooks/opentelemetry'

if (process.argv.includes('--als')) {
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks')
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
}

const DELIVERIES = 2_000
const ROUNDS = 30
const drop = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} }
class Reader extends MetricReader {
  async onShutdown() {}
  async onForceFlush() {}
}
function sdk() {
  const reader = new Reader()
  return {
    reader,
    tracerProvider: new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(drop)] }),
    meterProvider: new MeterProvider({ readers: [reader] }),
  }
}
const handler = () => {}
const resultOf = (i) => ({ outcome: 'processed', status: 200, durationMs: 0, id: `evt_${i}`, endpoint: 'default', eventType: 'message.received' })

const ours = sdk()
const telemetry = openTelemetry(ours)
function pkg(n) {
  for (let i = 0; i < n; i++) {
    const scope = telemetry.receive()
    scope.verified()
    scope.run(handler)
    scope.end(resultOf(i))
  }
}

/** The SDK calls that record the same span and metrics, on an SDK of their own. */
function direct() {
  const own = sdk()
  const meter = own.meterProvider.getMeter('svc-webhooks')
  return {
    own,
    tracer: own.tracerProvider.getTracer('svc-webhooks'),
    deliveries: meter.createCounter('svc_webhooks.deliveries'),
    handlerDuration: meter.createHistogram('svc_webhooks.handler.duration'),
    verificationDuration: meter.createHistogram('svc_webhooks.verification.duration'),
  }
}
const START = { 'messaging.system': 'svc-webhooks', 'messaging.operation.type': 'receive', 'messaging.operation.name': 'receive' }
function span({ tracer }, result) {
  const s = tracer.startSpan('receive', { kind: SpanKind.CONSUMER, attributes: START })
  const attributes = { 'messaging.operation.type': 'receive', 'svc_webhooks.outcome': result.outcome, 'http.response.status_code': result.status, 'messaging.destination.name': result.endpoint }
  s.setAttributes({ ...attributes, 'messaging.message.id': result.id, 'svc_webhooks.event_type': result.eventType })
  s.updateName(`receive ${result.endpoint}`)
  if (result.status >= 300) s.setStatus({ code: SpanStatusCode.ERROR })
  s.end()
  return attributes
}
function record({ deliveries, verificationDuration, handlerDuration }, attributes, verification, handling) {
  deliveries.add(1, attributes)
  verificationDuration.record(verification, attributes)
  handlerDuration.record(handling, attributes)
}
const bare = direct()
function bareSdk(n) {
  for (let i = 0; i < n; i++) {
    const started = performance.now()
    const verifiedAt = performance.now()
    const t = performance.now()
    handler()
    const handling = (performance.now() - t) / 1000
    record(bare, span(bare, resultOf(i)), (verifiedAt - started) / 1000, handling)
  }
}
const spans = direct()
function spanOnly(n) {
  for (let i = 0; i < n; i++) span(spans, resultOf(i))
}
const FIXED = { 'messaging.operation.type': 'receive', 'svc_webhooks.outcome': 'processed', 'http.response.status_code': 200, 'messaging.destination.name': 'default' }
const records = direct()
function metricsOnly(n) {
  for (let i = 0; i < n; i++) record(records, { ...FIXED }, 0.0001, 0.00001)
}

const cases = { 'openTelemetry()': pkg, 'bare SDK calls': bareSdk, 'span alone': spanOnly, 'three metric records alone': metricsOnly }
const best = Object.fromEntries(Object.keys(cases).map((name) => [name, Infinity]))
const entries = Object.entries(cases)
for (let round = 0; round < ROUNDS; round++) {
  for (let k = 0; k < entries.length; k++) {
    const [name, run] = entries[(k + round) % entries.length]
    const before = process.cpuUsage()
    run(DELIVERIES)
    const used = process.cpuUsage(before)
    best[name] = Math.min(best[name], (used.user + used.system) / DELIVERIES)
    await new Promise((resolve) => setImmediate(resolve))
  }
  await Promise.all([ours, bare.own, spans.own, records.own].map(({ reader }) => reader.collect()))
}
console.log(`Node ${process.versions.node}${process.argv.includes('--als') ? ', AsyncLocalStorage context manager' : ''}; least CPU per delivery over ${ROUNDS} rounds of ${DELIVERIES}`)
for (const [name, us] of Object.entries(best)) console.log(`${name.padEnd(28)} ${us.toFixed(2)} µs`)
