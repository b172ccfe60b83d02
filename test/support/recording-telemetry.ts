/**
 * A telemetry that records, for the job-queue engine suites: each receive scope hands out its own
 * trace context, each process scope notes the trace context it was started with and how it ended.
 */
import { randomUUID } from 'node:crypto'
import type { WebhookTelemetry } from 'svc-webhooks'

/**
 * @example
 * const { telemetry, received, processed } = recordingTelemetry()
 */
export function recordingTelemetry() {
  const received: string[] = []
  const processed: { id: string; traceparent?: string; outcome?: string }[] = []
  const telemetry: WebhookTelemetry = {
    receive() {
      const traceparent = `00-${randomUUID().replaceAll('-', '')}-${randomUUID().replaceAll('-', '').slice(0, 16)}-01`
      received.push(traceparent)
      return { verified: () => {}, run: (fn) => fn(), traceparent: () => traceparent, end: () => {} }
    },
    process(start) {
      const seen: (typeof processed)[number] = { id: start.id, ...(start.traceparent !== undefined && { traceparent: start.traceparent }) }
      processed.push(seen)
      return { verified: () => {}, run: (fn) => fn(), traceparent: () => start.traceparent, end: (result) => void (seen.outcome = result.outcome) }
    },
  }
  return { telemetry, received, processed }
}
