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

/**
 * Attribute sets kept, each built once and frozen: a receiver sees a handful (outcome, status,
 * code, endpoint). Past this many, sets are built per delivery and not kept, so endpoints made up
 * in URLs cannot grow memory (the SDK's own limit per metric is 2,000).
 */
const MAX_ATTRIBUTE_SETS = 1_000

/** Set when a span starts: samplers see them. Frozen and shared: the SDK copies what it is given. */
const RECEIVE_START: Attributes = Object.freeze({ [ATTR.system]: SYSTEM, [ATTR.operationType]: 'receive', [ATTR.operationName]: 'receive' })

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

/** Whether a result is a failure: a status of 300 or more, or (with no status) an outcome that is not a success. */
function isFailure(result: TelemetryResult): boolean {
  if (result.status !== undefined) return result.status >= 300
  const outcome = result.outcome
  return outcome !== 'processed' && outcome !== 'ignored' && outcome !== 'duplicate'
}

/** What the scopes of one `openTelemetry()` share. */
interface Shared {
  meter(): Instruments
  /** The metric attribute set of a result: built once and kept (frozen) for the first sets seen. */
  setOf(operation: 'receive' | 'process', result: TelemetryResult, failed: boolean): AttributeSet
}

/** An attribute set and the deliveries counted with it since the SDK's last collection (kept sets only). */
interface AttributeSet {
  attributes: Attributes
  /** The span's name for it (`receive default`), or undefined with no endpoint. */
  spanName: string | undefined
  kept: boolean
  unreported: number
}

/**
 * One delivery's scope. A class, not closures: a receiver makes one per request, and its methods
 * are shared. The span carries the result's attributes; the metrics its attribute set.
 */
class Scope implements TelemetryScope {
  private verifiedAt: number | undefined = undefined
  private handlerSeconds: number | undefined = undefined
  private ended = false

  constructor(
    private readonly shared: Shared,
    private readonly operation: 'receive' | 'process',
    private readonly span: Span,
    private readonly started: number,
  ) {}

  verified(): void {
    this.verifiedAt ??= now()
  }

  run<T>(fn: () => T): T {
    const start = now()
    let value: T
    try {
      value = context.with(trace.setSpan(context.active(), this.span), fn)
    } catch (error) {
      this.handlerSeconds = (now() - start) / 1000
      throw error
    }
    const pending = value as unknown
    if (pending !== null && typeof pending === 'object' && typeof (pending as Promise<unknown>).then === 'function') {
      const finish = () => void (this.handlerSeconds = (now() - start) / 1000)
      ;(pending as Promise<unknown>).then(finish, finish)
    } else this.handlerSeconds = (now() - start) / 1000
    return value
  }

  traceparent(): string | undefined {
    return traceparentOf(this.span)
  }

  end(result: TelemetryResult): void {
    if (this.ended) return
    this.ended = true
    const { span, operation } = this
    const failed = isFailure(result)
    const set = this.shared.setOf(operation, result, failed)
    const attributes = set.attributes

    // The span: the metric attribute set and the delivery's own (id, event type, attempts), set
    // one by one (no merged copy); a name with the endpoint; an error status when it failed.
    span.setAttributes(attributes)
    if (result.id !== undefined) span.setAttribute(ATTR.messageId, result.id)
    if (result.eventType !== undefined) span.setAttribute(ATTR.eventType, result.eventType)
    if (result.attempts !== undefined) span.setAttribute(ATTR.attempts, result.attempts)
    if (set.spanName !== undefined) span.updateName(set.spanName)
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: result.code ?? result.outcome })
    span.end()

    const m = this.shared.meter()
    // Counted here and handed to the SDK at its next collection; a set not kept, at once.
    if (set.kept) set.unreported++
    else m.deliveries.add(1, attributes)
    if (this.verifiedAt !== undefined) m.verificationDuration.record((this.verifiedAt - this.started) / 1000, attributes)
    if (this.handlerSeconds !== undefined) m.handlerDuration.record(this.handlerSeconds, attributes)
  }
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
  /** Attribute sets by operation, outcome, status, code and endpoint, with deliveries counted since the last collection. */
  const sets = new Map<string, AttributeSet>()

  // Resolved at first use, so an SDK registered after the receiver was created is still found.
  function meter(): Instruments {
    if (instruments) return instruments
    const m = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE_NAME)
    const deliveries = m.createCounter('svc_webhooks.deliveries', { description: 'Deliveries by outcome, status and code, received or processed.', unit: '{delivery}' })
    instruments = {
      meter: m,
      deliveries,
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
    const paused = gauge('svc_webhooks.inbox.paused', 'Whether the workers of the inbox are paused (1) or not (0).', '1')
    const rateLimit = gauge('svc_webhooks.inbox.rate_limit', 'Handler starts per second the workers of the inbox share, when limited.', '{delivery}/s')
    m.addBatchObservableCallback(
      async (result) => {
        // The SDK calls this before it reads its counters: the deliveries counted since the last
        // collection go in now, one add per attribute set (the SDK hashes a set on every call).
        for (const set of sets.values()) {
          if (set.unreported === 0) continue
          deliveries.add(set.unreported, set.attributes)
          set.unreported = 0
        }
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
              if (figures.inbox.paused !== undefined) result.observe(paused, figures.inbox.paused ? 1 : 0, attributes)
              if (figures.inbox.rateLimitPerSecond !== undefined) result.observe(rateLimit, figures.inbox.rateLimitPerSecond, attributes)
            }
          }),
        )
      },
      [streak, depth, oldest, retrying, dead, paused, rateLimit],
    )
    return instruments
  }

  function build(operation: 'receive' | 'process', result: TelemetryResult, failed: boolean): Attributes {
    const attributes: Attributes = { [ATTR.operationType]: operation, [ATTR.outcome]: result.outcome }
    if (result.status !== undefined) attributes[ATTR.status] = result.status
    if (result.code !== undefined) attributes[ATTR.code] = result.code
    if (result.endpoint !== undefined) attributes[ATTR.destination] = result.endpoint
    if (failed) attributes[ATTR.errorType] = result.code ?? result.outcome
    return attributes
  }

  const shared: Shared = {
    meter,
    setOf(operation, result, failed) {
      // Only these fields make the set (`error.type` follows from them); no field but the
      // endpoint's name can hold a line break, and it comes last.
      const key = `${operation}\n${result.outcome}\n${result.status ?? ''}\n${result.code ?? ''}\n${result.endpoint ?? ''}`
      const found = sets.get(key)
      if (found) return found
      const attributes = build(operation, result, failed)
      const spanName = result.endpoint === undefined ? undefined : `${operation} ${result.endpoint}`
      if (sets.size >= MAX_ATTRIBUTE_SETS) return { attributes, spanName, kept: false, unreported: 0 }
      const set = { attributes: Object.freeze(attributes), spanName, kept: true, unreported: 0 }
      sets.set(key, set)
      return set
    },
  }

  return {
    receive() {
      // Started in the active context: under an HTTP server span from the Node or framework
      // instrumentation, the receive span is its child.
      return new Scope(shared, 'receive', tracer.startSpan('receive', { kind: SpanKind.CONSUMER, attributes: RECEIVE_START }), now())
    },
    process(start: ProcessStart) {
      // A child of the receive span, across the inbox: the trace context travelled with the delivery.
      const span = tracer.startSpan(
        `process ${start.endpoint}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            [ATTR.system]: SYSTEM,
            [ATTR.operationType]: 'process',
            [ATTR.operationName]: 'process',
            [ATTR.messageId]: start.id,
            [ATTR.destination]: start.endpoint,
          },
        },
        parentFrom(start.traceparent),
      )
      return new Scope(shared, 'process', span, now())
    },
    observe(component, read) {
      const source = { component, read }
      sources.add(source)
      meter()
      return () => void sources.delete(source)
    },
  }
}
