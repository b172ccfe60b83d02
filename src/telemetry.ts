/**
 * The telemetry hook every entry, the receiver and the inbox worker call (DESIGN.md
 * "Observability in the stack teams run"): a scope per delivery received and per delivery
 * processed, ended with its result. The core imports no tracing library: `svc-webhooks/opentelemetry`
 * implements this interface over `@opentelemetry/api`, and with no `telemetry` option nothing is
 * called at all.
 */

/** What a scope is ended with: the receiver's `WebhookResult` or the worker's `InboxWorkerResult` fit it. */
export interface TelemetryResult {
  outcome: string
  /** The HTTP status answered (receive only). */
  status?: number
  /** The refusal or answer code, when not a success. */
  code?: string
  id?: string
  /**
   * The endpoint, once it is known: configured, verified, or found by the `secret` lookup.
   * {@link UNKNOWN_ENDPOINT} for a name taken from a request that was none of these (anyone can
   * put any name in a URL), so labels and span names cannot be made up at an attacker's rate.
   */
  endpoint?: string
  eventType?: string
  /** Handler attempts so far (process only). */
  attempts?: number
  error?: unknown
}

/** One delivery's span and measurements, from arrival (or take) to its result. */
export interface TelemetryScope {
  /** The signature was checked (verified or refused): verification duration ends here. */
  verified(): void
  /** Runs `fn` (the handler) inside this scope, so the spans it starts are its children; times it. */
  run<T>(fn: () => T): T
  /** A W3C `traceparent` for this scope, carried with an accepted delivery to the worker's process scope. */
  traceparent(): string | undefined
  /** Ends the scope with its result. Called exactly once. */
  end(result: TelemetryResult): void
}

/** A delivery a worker is about to process. */
export interface ProcessStart {
  id: string
  endpoint: string
  /** The receive scope's `traceparent`, as accepted with the delivery. */
  traceparent?: string
}

/** Figures read when a metrics backend collects (observable gauges). */
export interface TelemetryGauges {
  /** Failing answers in a row (the receiver). */
  consecutiveFailures?: number
  /**
   * The inbox's figures; `paused` and `rateLimitPerSecond` (flow control, DESIGN.md "Flow
   * control") where the engine keeps them.
   */
  inbox?: { depth: number; oldestAgeMs: number; retrying: number; dead: number; paused?: boolean; rateLimitPerSecond?: number }
}

/**
 * A telemetry backend. `svc-webhooks/opentelemetry`'s `openTelemetry()` is one; write your own for
 * another backend.
 */
export interface WebhookTelemetry {
  /** A request arrived: called before anything of it is read. */
  receive(): TelemetryScope
  /** A worker (or the Queues consumer) starts processing an accepted delivery. */
  process(start: ProcessStart): TelemetryScope
  /**
   * Registers a source of gauges read at each collection (`component` tells a receiver from a
   * worker). Returns a function that unregisters it.
   */
  observe?(component: 'receiver' | 'worker', read: () => Promise<TelemetryGauges> | TelemetryGauges): () => void
}

/** What a telemetry result names an endpoint that is not known (a name made up in a URL). */
export const UNKNOWN_ENDPOINT = 'unknown'

/**
 * Ends `scope` with `result`, its endpoint replaced by {@link UNKNOWN_ENDPOINT} unless `known`.
 * The result is lent, not copied (no allocation per delivery), and given back as it was: the log
 * line and `onResult` still see the name as sent.
 *
 * @example
 * if (scope) endScope(scope, result, tenantFound || result.signatureVersion !== undefined)
 */
export function endScope(scope: TelemetryScope, result: TelemetryResult, known: boolean): void {
  const name = result.endpoint
  if (name === undefined || known) return scope.end(result)
  result.endpoint = UNKNOWN_ENDPOINT
  try {
    scope.end(result)
  } finally {
    result.endpoint = name
  }
}
