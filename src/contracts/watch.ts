/**
 * The endpoint-watch contract: what the receiver and the inbox worker start when given `watch`
 * (made by `endpointWatcher` in svc-webhooks/service, which implements it). The core knows only
 * these types, so a receiver that does not watch pays nothing for the watch, not even bytes.
 */
import type { WebhookInput } from '../input.js'
import type { IdempotencyStore } from './store.js'

/** What a watch knows of its endpoint: `stats().endpoint` of a receiver that watches. */
export interface EndpointWatchView {
  endpointId: string
  /** As last read; undefined before the first answered read. */
  enabled?: boolean
  /** The service's streak of failed deliveries, as last read. */
  consecutiveFailures?: number
  /** The service's `last_error`, set when it disabled the endpoint. */
  lastError?: string | null
  /** When the service last answered a read, in milliseconds since the epoch. */
  lastReadAt?: number
  /** When this watch last enabled the endpoint again. */
  reenabledAt?: number
  /**
   * Who disabled it, while it is disabled: `service` after failures (`last_error` set, spec §3.2),
   * which `reenable` undoes; `operator` on purpose, which is left as it is.
   */
  disabledBy?: 'service' | 'operator'
  /**
   * The service disabled it again after this watch enabled it, with no delivery delivered in
   * between: the watch no longer re-enables it until someone else does.
   */
  heldBack?: boolean
  /** Why the last read or re-enable failed (never the token), or why the receiver was not ready to be re-enabled. */
  error?: string
}

/** What a readiness check looks at: the parts a receiver or a worker has. */
export interface ReadinessParts {
  /** The receiver's `secret` option: strings, or a SecretSource. */
  secret?: unknown
  /** The receiver's own verification (`verifySignature` with its options): the probe goes through it. */
  verify?: (input: WebhookInput) => Promise<unknown>
  /** The receiver's clock. */
  now?: () => number
  store?: IdempotencyStore
  inbox?: { stats?: () => Promise<unknown> }
}

/** A running watch. */
export interface EndpointWatch {
  /** Stops reading: clears the timer; a read on its way is not acted on. */
  stop(): void
  /** A copy of what the watch knows now. */
  view(): EndpointWatchView
}

/**
 * The `watch` option of `createWebhookReceiver` and `createInboxWorker`, made by
 * {@link endpointWatcher}: the receiver starts it when created, the worker in `start()`.
 */
export interface EndpointWatcher {
  /** Starts the watch; `parts` are what the receiver's readiness is judged from. */
  start(parts: ReadinessParts, log: ((line: string) => void) | undefined): EndpointWatch
}

/** Why a receiver is not ready (a short phrase), or undefined when it is. */
export type Readiness = () => Promise<string | undefined>
