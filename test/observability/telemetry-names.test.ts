/**
 * Telemetry names an endpoint only once it is known (configured, verified, or found by the
 * `secret` lookup); any other name a request carries is `unknown`, in the metric labels and in
 * the span names. With the real OpenTelemetry SDK: a metric reader counts the series 2,000
 * made-up names leave, and the heap after 2,100 requests with 12 KB names stays bounded.
 */
import { runInNewContext } from 'node:vm'
import { setFlagsFromString } from 'node:v8'
import { afterEach, describe, expect, it } from 'vitest'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics'
import { createWebhookReceiver, type WebhookRequest } from 'svc-webhooks'
import { openTelemetry } from 'svc-webhooks/opentelemetry'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const TENANTS: Record<string, string> = {
  shop: 'svc_whsec_VGVsZW1ldHJ5TmFtZXNTaG9wU2VjcmV0MQ',
  cafe: 'svc_whsec_VGVsZW1ldHJ5TmFtZXNDYWZlU2VjcmV0Mg',
}
const MADE_UP = 2_000

class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const exporter = new InMemorySpanExporter()
afterEach(() => exporter.reset())

/** A receiver of many tenants, the tenant named by a header (as a URL would name it), with real SDK providers. */
function tenantsReceiver(spans = true) {
  const reader = new TestReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const tracerProvider = new BasicTracerProvider({ spanProcessors: spans ? [new SimpleSpanProcessor(exporter)] : [] })
  const tenantOf = (req: WebhookRequest) => String((req.headers as Record<string, unknown>)['x-tenant'] ?? '')
  const receiver = createWebhookReceiver({
    secret: (req: WebhookRequest) => TENANTS[tenantOf(req)] ?? [],
    endpoint: tenantOf,
    log: false,
    on: { 'message.received': () => undefined },
    telemetry: openTelemetry({ tracerProvider, meterProvider }),
  })
  return { receiver, reader }
}

async function signed(secret: string, tenant: string): Promise<WebhookRequest> {
  const delivery = await signWebhook({ secret, event: sampleEvent('message.received') })
  return { method: 'POST', body: delivery.rawBody, headers: { ...delivery.headers, 'x-tenant': tenant } }
}

/** Every data point of every metric, with its attributes. */
async function series(reader: MetricReader): Promise<Array<{ metric: string; attributes: Record<string, unknown> }>> {
  const { resourceMetrics, errors } = await reader.collect()
  expect(errors).toEqual([])
  return (resourceMetrics as ResourceMetrics).scopeMetrics.flatMap((scope) =>
    scope.metrics.flatMap((m) => (m.dataPoints as Array<{ attributes: Record<string, unknown> }>).map((point) => ({ metric: m.descriptor.name, attributes: point.attributes }))),
  )
}

describe('telemetry names only known endpoints', () => {
  it('2,000 made-up names in requests that do not verify: one `unknown` series per answer, none named after them', async () => {
    const { receiver, reader } = tenantsReceiver()
    // A forged request: a well-formed signature under a secret no tenant has.
    const forged = await signed('svc_whsec_Tm9ib2R5c1NlY3JldEF0QWxsWFhYWFhYWA', '')
    for (let i = 0; i < MADE_UP; i++) {
      const answer = await receiver.handle({ ...forged, headers: { ...forged.headers, 'x-tenant': `made-up-${i}-${crypto.randomUUID()}` } })
      expect(answer.status).toBe(404)
    }
    // Known tenants: a verified delivery, and a refusal of a tenant the lookup found.
    expect((await receiver.handle(await signed(TENANTS.shop!, 'shop'))).status).toBe(200)
    expect((await receiver.handle(await signed(TENANTS.shop!, 'cafe'))).status).toBe(401)

    const points = await series(reader)
    const destinations = new Set(points.map((p) => p.attributes['messaging.destination.name']).filter((d) => d !== undefined))
    console.log(`telemetry names: ${MADE_UP} made-up endpoint names left ${points.length} series over ${new Set(points.map((p) => p.metric)).size} metrics, ${destinations.size} destination names`)
    expect([...destinations].sort()).toEqual(['cafe', 'shop', 'unknown'])
    expect(points.length).toBeLessThan(20)
    const deliveries = points.filter((p) => p.metric === 'svc_webhooks.deliveries')
    expect(deliveries.map((p) => p.attributes['messaging.destination.name']).sort()).toEqual(['cafe', 'shop', 'unknown'])

    const names = new Set(exporter.getFinishedSpans().map((span) => span.name))
    expect([...names].sort()).toEqual(['receive cafe', 'receive shop', 'receive unknown'])
    expect(exporter.getFinishedSpans().some((span) => String(span.attributes['messaging.destination.name']).startsWith('made-up'))).toBe(false)
  })

  it('with one secret and a name from the request, the name is unknown until the delivery verifies', async () => {
    const reader = new TestReader()
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
    const receiver = createWebhookReceiver({
      secret: TENANTS.shop!,
      endpoint: (req: WebhookRequest) => String((req.headers as Record<string, unknown>)['x-tenant'] ?? ''),
      log: false,
      on: { 'message.received': () => undefined },
      telemetry: openTelemetry({ tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) }),
    })
    expect((await receiver.handle(await signed(TENANTS.cafe!, 'made-up'))).status).toBe(401)
    expect((await receiver.handle(await signed(TENANTS.shop!, 'shop'))).status).toBe(200)
    expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual(['receive unknown', 'receive shop'])
  })
})

describe('memory under made-up names', () => {
  it('2,100 requests with 12 KB names: the heap keeps a few MiB at most', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const { receiver, reader } = tenantsReceiver(false)
    const forged = await signed('svc_whsec_Tm9ib2R5c1NlY3JldEF0QWxsWFhYWFhYWA', '')
    const settle = async () => {
      await series(reader)
      for (let i = 0; i < 3; i++) {
        gc()
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      return process.memoryUsage().heapUsed
    }
    // Warm up: the instruments and the first sets exist before the baseline.
    for (let i = 0; i < 20; i++) await receiver.handle({ ...forged, headers: { ...forged.headers, 'x-tenant': `warm-${i}` } })
    const before = await settle()
    for (let i = 0; i < 2_100; i++) {
      const name = `${i}-`.padEnd(12 * 1024, 'n')
      await receiver.handle({ ...forged, headers: { ...forged.headers, 'x-tenant': name } })
    }
    const after = await settle()
    const grownMiB = (after - before) / 2 ** 20
    console.log(`telemetry names: heap +${grownMiB.toFixed(1)} MiB after 2,100 requests with 12 KB made-up names`)
    expect(grownMiB).toBeLessThan(8)
  })
})
