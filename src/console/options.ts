/**
 * The console's options, and the shapes it reads of the parts it shows (structural, so the
 * console bundle imports no engine, adapter or service client).
 */
import type { ReceiverStats } from '../visibility.js'
import type { DeadLetter, InboxStats } from '../contracts/inbox.js'
import type { ReplayResult, WebhookHistory } from '../history/types.js'

/** What `authorize` may answer: allow (true), refuse (false: 403), or a refusal of its own (a 401 with `WWW-Authenticate`). */
export type ConsoleAuthorization = boolean | Response

/** The receiver (or an adapter's handler): its stats, and `replay` with `history`. */
export interface ConsoleReceiver {
  stats(): Promise<ReceiverStats>
  replay?(id: string, endpoint?: string): Promise<ReplayResult>
}

/** The inbox as the console reads it. */
export interface ConsoleInbox {
  stats(): Promise<InboxStats & { paused?: boolean }>
  dead(limit?: number): Promise<DeadLetter[]>
  requeue(key: string): Promise<boolean>
  purge(key: string): Promise<boolean>
}

/** The worker: `replay`, and the flow controls when it has them (found by their presence). */
export interface ConsoleWorker {
  readonly active?: number
  replay?(id: string, endpoint?: string): Promise<ReplayResult>
  pause?(): unknown
  resume?(): unknown
  readonly paused?: boolean
  readonly inbox?: ConsoleInbox
}

/** The service client (`createServiceClient` from svc-webhooks/service), as the console uses it. */
export interface ConsoleService {
  endpoints: {
    list(): Promise<Array<{ id: string; label?: string; url?: string; enabled: boolean; consecutive_failures: number; last_error: string | null; last_delivery_at?: string | null }>>
    enable(endpointId: string): Promise<unknown>
  }
  deliveries: { resend(deliveryId: string): Promise<unknown> }
}

/** Options of {@link createConsole}. */
export interface ConsoleOptions {
  /**
   * Decides every request, pages and actions alike, before anything is read: `true` lets it
   * through, `false` answers 403, a `Response` is sent as it is (a 401 asking for credentials).
   * A throw answers 401. Required: there is no open console.
   */
  authorize: (request: Request) => ConsoleAuthorization | Promise<ConsoleAuthorization>
  /** The history the receiver and the worker write: the history and refusal pages, replay. */
  history?: WebhookHistory
  /** The receiver, or an adapter's handler (`webhooks(...)`): stats and replay. */
  receiver?: ConsoleReceiver
  /** The inbox worker: replay, flow controls, and its inbox for the dead letters. */
  worker?: ConsoleWorker
  /**
   * The inbox for the dead letters and its figures.
   * @default worker.inbox
   */
  inbox?: ConsoleInbox
  /** The service client: the endpoint as the service sees it, enable it, resend deliveries. */
  service?: ConsoleService
  /** The endpoint's id at the service (with `service`). */
  endpointId?: string
  /**
   * No actions at all: no buttons, and every POST answered 403.
   * @default false
   */
  readOnly?: boolean
  /**
   * Show kept bodies (history with `keepBodies`, dead letters), through `redact`.
   * @default false
   */
  showBodies?: boolean
  /** With `showBodies`: what of an event is shown, e.g. removing personal data. */
  redact?: (event: unknown) => unknown
  /**
   * Where the console is mounted (`/admin/webhooks`). By default it is found from the URL: its
   * pages are the last segment (`history`, `dead`, ...), anything else is the mount point.
   */
  basePath?: string
  /** Origins besides the request's own whose POSTs are accepted (a console behind a proxy that rewrites Host). */
  allowedOrigins?: string[]
  /**
   * Signs the actions' CSRF tokens. Give the same value to every process behind one address;
   * by default each console draws its own at start.
   */
  csrfSecret?: string
  /**
   * Longest wait for an engine or the service while a page renders or an action runs; past it the answer is a 503 page.
   * @default 5000
   */
  timeoutMs?: number
  /** The clock (tests). @default Date.now */
  now?: () => number
}
