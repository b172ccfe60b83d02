/**
 * `svc-webhooks/opentelemetry`: traces and metrics through `@opentelemetry/api` (an optional peer
 * dependency; only this entry imports it). A span per delivery received and per delivery
 * processed by a worker, named and attributed after OpenTelemetry's messaging conventions, and
 * the metrics a dashboard or an alert reads: deliveries by outcome and status, handler and
 * verification durations, the failing-answer streak and the inbox's depth, oldest age, retrying
 * and dead letters. A Prometheus scrape is OpenTelemetry's own `@opentelemetry/exporter-prometheus`
 * on the same meter provider (docs/observability.md).
 *
 * Never the secret, a signature or body bytes in an attribute or an event: a span carries the
 * delivery id, the endpoint, the event type, the outcome, the status and the answer's code.
 */
import {
  context,
  metrics,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Counter,
  type Histogram,
  type Meter,
  type MeterProvider,
  type ObservableGauge,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api'
import type { ProcessStart, TelemetryGauges, TelemetryResult, TelemetryScope, WebhookTelemetry } from './telemetry.js'

export type { ProcessStart, TelemetryGauges, TelemetryResult, TelemetryScope, WebhookTelemetry } from './telemetry.js'

/** Options of {@link openTelemetry}. */
export interface OpenTelemetryOptions {
  /**
   * Where spans go.
   * @default the global tracer provider (`trace.getTracerProvider()`)
   */
  tracerProvider?: TracerProvider
  /**
   * Where metrics go. Register the SDK's global provider before the first delivery, or pass one.
   * @default the global meter provider (`metrics.getMeterProvider()`), read at the first delivery
   */
  meterProvider?: MeterProvider
}

const SCOPE_NAME = 'svc-webhooks'
/** `messaging.system`: the conventions' value for a system they do not list is its own name. */
const SYSTEM = 'svc-webhooks'

/** Attribute names: OpenTelemetry's semantic conventions where one exists, `svc_webhooks.*` otherwise. */
const ATTR = {
  system: 'messaging.system',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  destination: 'messaging.destination.name',
  status: 'http.response.status_code',
  errorType: 'error.type',
  outcome: 'svc_webhooks.outcome',
  code: 'svc_webhooks.code',
  eventType: 'svc_webhooks.event_type',
  attempts: 'svc_webhooks.attempts',
  component: 'svc_webhooks.component',
} as const

interface Instruments {
  deliveries: Counter
  handlerDuration: Histogram
  verificationDuration: Histogram
  meter: Meter
}

const now = (): number => performance.now()

// The SDK's default boundaries (0 to 10 000) suit milliseconds; these are seconds. A verification
// takes microseconds to a body-read deadline (10 s); a handler up to the sender's 10 s, or minutes behind an inbox.
const VERIFICATION_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const HANDLER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

/** A W3C traceparent (version 00) for a span, or undefined when it is not recording anywhere. */
function traceparentOf(span: Span): string | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext()
  if (!/^[0-9a-f]{32}$/.test(traceId) || /^0+$/.test(traceId) || !/^[0-9a-f]{16}$/.test(spanId) || /^0+$/.test(spanId)) return undefined
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`
}

/** The context a traceparent names, as a remote parent; the active context when it is absent or malformed. */
function parentFrom(traceparent: string | undefined) {
  const match = typeof traceparent === 'string' ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent) : null
  if (!match || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return context.active()
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: match[1]!, spanId: match[2]!, traceFlags: parseInt(match[3]!, 16), isRemote: true })
}

/**
 * Telemetry over OpenTelemetry, for the `telemetry` option of every entry,
 * `createWebhookReceiver` and `createInboxWorker`.
 *
 * @example
 * import { openTelemetry } from 'svc-webhooks/opentelemetry'
 * app.post('/webhooks/svc', webhooks({ secret, on, telemetry: openTelemetry() }))
 */
export function openTelemetry(options: OpenTelemetryOptions = {}): WebhookTelemetry {
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE_NAME)
  let instruments: Instruments | undefined
  const sources = new Set<{ component: 'receiver' | 'worker'; read: () => Promise<TelemetryGauges> | TelemetryGauges }>()

  // Resolved at first use, so an SDK registered after the receiver was created is still found.
  function meter(): Instruments {
    if (instruments) return instruments
    const m = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE_NAME)
    instruments = {
      meter: m,
      deliveries: m.createCounter('svc_webhooks.deliveries', { description: 'Deliveries by outcome, status and code, received or processed.', unit: '{delivery}' }),
      handlerDuration: m.createHistogram('svc_webhooks.handler.duration', {
        description: 'Time spent in a handler.',
        unit: 's',
        advice: { explicitBucketBoundaries: HANDLER_BUCKETS },
      }),
      verificationDuration: m.createHistogram('svc_webhooks.verification.duration', {
        description: 'Time from a request arriving to its signature being checked (body read included).',
        unit: 's',
        advice: { explicitBucketBoundaries: VERIFICATION_BUCKETS },
      }),
    }
    const gauge = (name: string, description: string, unit: string): ObservableGauge => m.createObservableGauge(name, { description, unit })
    const streak = gauge('svc_webhooks.failing_streak', 'Failing answers in a row; the sender disables the endpoint at 20.', '{answer}')
    const depth = gauge('svc_webhooks.inbox.depth', 'Deliveries waiting or being processed.', '{delivery}')
    const oldest = gauge('svc_webhooks.inbox.oldest_age', 'Age of the oldest waiting or processing delivery.', 's')
    const retrying = gauge('svc_webhooks.inbox.retrying', 'Deliveries whose handler failed and will be tried again.', '{delivery}')
    const dead = gauge('svc_webhooks.inbox.dead', 'Deliveries in the dead-letter list.', '{delivery}')
    m.addBatchObservableCallback(
      async (result) => {
        await Promise.all(
          [...sources].map(async ({ component, read }) => {
            let figures: TelemetryGauges
            try {
              figures = await read()
            } catch {
              return // An inbox that cannot be read now has no figure this time; the next collection tries again.
            }
            const attributes = { [ATTR.component]: component }
            if (figures.consecutiveFailures !== undefined) result.observe(streak, figures.consecutiveFailures, attributes)
            if (figures.inbox) {
              result.observe(depth, figures.inbox.depth, attributes)
              result.observe(oldest, figures.inbox.oldestAgeMs / 1000, attributes)
              result.observe(retrying, figures.inbox.retrying, attributes)
              result.observe(dead, figures.inbox.dead, attributes)
            }
          }),
        )
      },
      [streak, depth, oldest, retrying, dead],
    )
    return instruments
  }

  function scope(operation: 'receive' | 'process', span: Span, started: number): TelemetryScope {
    let verifiedAt: number | undefined
    let handlerSeconds: number | undefined
    let ended = false
    return {
      verified() {
        verifiedAt ??= now()
      },
      run(fn) {
        const start = now()
        const finish = () => (handlerSeconds = (now() - start) / 1000)
        let value: ReturnType<typeof fn>
        try {
          value = context.with(trace.setSpan(context.active(), span), fn)
        } catch (error) {
          finish()
          throw error
        }
        const pending = value as unknown
        if (pending !== null && typeof pending === 'object' && typeof (pending as Promise<unknown>).then === 'function') {
          ;(pending as Promise<unknown>).then(finish, finish)
        } else finish()
        return value
      },
      traceparent: () => traceparentOf(span),
      end(result: TelemetryResult) {
        if (ended) return
        ended = true
        const attributes: Attributes = { [ATTR.operationType]: operation, [ATTR.outcome]: result.outcome }
        if (result.status !== undefined) attributes[ATTR.status] = result.status
        if (result.code !== undefined) attributes[ATTR.code] = result.code
        if (result.endpoint !== undefined) attributes[ATTR.destination] = result.endpoint
        const failed = result.status !== undefined ? result.status >= 300 : !['processed', 'ignored', 'duplicate'].includes(result.outcome)
        if (failed) attributes[ATTR.errorType] = result.code ?? result.outcome

        const spanAttributes: Attributes = { ...attributes }
        if (result.id !== undefined) spanAttributes[ATTR.messageId] = result.id
        if (result.eventType !== undefined) spanAttributes[ATTR.eventType] = result.eventType
        if (result.attempts !== undefined) spanAttributes[ATTR.attempts] = result.attempts
        span.setAttributes(spanAttributes)
        if (result.endpoint !== undefined) span.updateName(`${operation} ${result.endpoint}`)
        if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: result.code ?? result.outcome })
        span.end()

        const m = meter()
        m.deliveries.add(1, attributes)
        if (verifiedAt !== undefined) m.verificationDuration.record((verifiedAt - started) / 1000, attributes)
        if (handlerSeconds !== undefined) m.handlerDuration.record(handlerSeconds, attributes)
      },
    }
  }

  const base = { [ATTR.system]: SYSTEM }
  return {
    receive() {
      // Started in the active context: under an HTTP server span from the Node or framework
      // instrumentation, the receive span is its child.
      const span = tracer.startSpan('receive', { kind: SpanKind.CONSUMER, attributes: { ...base, [ATTR.operationType]: 'receive', [ATTR.operationName]: 'receive' } })
      return scope('receive', span, now())
    },
    process(start: ProcessStart) {
      // A child of the receive span, across the inbox: the trace context travelled with the delivery.
      const span = tracer.startSpan(
        `process ${start.endpoint}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            ...base,
            [ATTR.operationType]: 'process',
            [ATTR.operationName]: 'process',
            [ATTR.messageId]: start.id,
            [ATTR.destination]: start.endpoint,
          },
        },
        parentFrom(start.traceparent),
      )
      return scope('process', span, now())
    },
    observe(component, read) {
      const source = { component, read }
      sources.add(source)
      meter()
      return () => void sources.delete(source)
    },
  }
}
