/**
 * The worker's process span joins the trace of the span that received the delivery, across every
 * inbox (MemoryInbox, a real redis-server, a real Postgres): the receiver stores the trace
 * context with the accepted delivery, the worker reads it back. Real OpenTelemetry SDK.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SpanStatusCode } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { createInboxWorker, createWebhookReceiver, MemoryInbox, type WebhookInbox } from 'svc-webhooks'
import { openTelemetry } from 'svc-webhooks/opentelemetry'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { RedisInbox } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const SECRET = 'svc_whsec_WorkerTraceSecretQ2hhbmdlTWUxx'

class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 25))
  expect(check(), what).toBe(true)
}

/** Two deliveries through a receiver into `inbox`, one handled, one failing once; then a worker. */
async function traceThrough(inbox: WebhookInbox): Promise<void> {
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const reader = new TestReader()
  const telemetry = openTelemetry({ tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) })
  const receiver = createWebhookReceiver({ secret: SECRET, inbox, log: false, telemetry })
  const ids: string[] = []
  for (const text of ['fine', 'fail-once']) {
    const event = sampleEvent('message.received')
    event.message.text = text
    const signed = await signWebhook({ secret: SECRET, event })
    ids.push(signed.id)
    expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(202)
  }
  const failed = new Set<string>()
  const worker = createInboxWorker({
    inbox,
    log: false,
    telemetry,
    pollIntervalMs: 20,
    firstRetryDelayMs: 1,
    on: {
      'message.received': (event, delivery) => {
        if (event.message.text === 'fail-once' && !failed.has(delivery.id)) {
          failed.add(delivery.id)
          throw new Error('failing once on purpose')
        }
      },
    },
  })
  worker.start()
  try {
    await until(() => exporter.getFinishedSpans().filter((s) => s.attributes['svc_webhooks.outcome'] === 'processed').length === 2, 'both processed')
  } finally {
    await worker.stop()
  }
  const spans = exporter.getFinishedSpans()
  for (const id of ids) {
    const receive = spans.find((s) => s.name.startsWith('receive') && s.attributes['messaging.message.id'] === id)!
    const processes = spans.filter((s) => s.name.startsWith('process') && s.attributes['messaging.message.id'] === id)
    expect(receive.attributes['svc_webhooks.outcome']).toBe('accepted')
    expect(processes.length).toBeGreaterThan(0)
    for (const p of processes) {
      expect(p.spanContext().traceId).toBe(receive.spanContext().traceId)
      expect(p.parentSpanContext?.spanId).toBe(receive.spanContext().spanId)
      expect(p.attributes['messaging.operation.type']).toBe('process')
    }
  }
  const retried = spans.find((s) => s.attributes['svc_webhooks.outcome'] === 'retrying')!
  expect(retried.status.code).toBe(SpanStatusCode.ERROR)
  expect(retried.attributes['svc_webhooks.attempts']).toBe(1)
  const { resourceMetrics } = await reader.collect()
  const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics)
  const deliveries = metrics.find((m) => m.descriptor.name === 'svc_webhooks.deliveries')!
  const processed = deliveries.dataPoints.filter((p) => p.attributes['messaging.operation.type'] === 'process' && p.attributes['svc_webhooks.outcome'] === 'processed')
  expect(processed.reduce((n, p) => n + (p.value as number), 0)).toBe(2)
  const depth = metrics.find((m) => m.descriptor.name === 'svc_webhooks.inbox.depth')!
  expect(depth.dataPoints.find((p) => p.attributes['svc_webhooks.component'] === 'worker')?.value).toBe(0)
}

describe('worker spans over MemoryInbox', () => {
  it('each process span is a child of its receive span; a retry is an error span; metrics by operation', () => traceThrough(new MemoryInbox()))
})

describeWithRedis('worker spans over RedisInbox', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await startRedisServer()
    client = new Redis(server.url)
    client.on('error', () => {})
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })
  it('each process span is a child of its receive span, the trace context stored in Redis', () =>
    traceThrough(new RedisInbox({ client, prefix: `trace-${randomUUID()}:` })))
})

describeWithPostgres('worker spans over PostgresInbox', () => {
  let server: PostgresServer
  let pool: pg.Pool
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })
  it('each process span is a child of its receive span, the trace context stored in Postgres', async () => {
    const inbox = new PostgresInbox({ pool, table: 'trace_inbox' })
    await inbox.ensureTable()
    await traceThrough(inbox)
  })
})
