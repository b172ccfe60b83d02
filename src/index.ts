/**
 * svc-webhooks: the framework-neutral core. Verification, the idempotency stores and the
 * answers table; adapters under `svc-webhooks/<framework>` only translate to and from it.
 */
export { ERROR_STATUS, WebhookVerificationError, errorResponse, isWebhookVerificationError, type WebhookErrorCode } from './errors.js'
export { isEventType, KNOWN_EVENT_TYPES } from './events.js'
export type { ReceiverStats, WebhookLog } from './visibility.js'
export type { ProcessStart, TelemetryGauges, TelemetryResult, TelemetryScope, WebhookTelemetry } from './telemetry.js'
export type {
  MessageReceivedEvent,
  UnknownWebhookEvent,
  WebhookEvent,
  WebhookEventMap,
  WebhookEventType,
} from './events.js'
export {
  HEADER_EVENT,
  HEADER_ID,
  HEADER_SIGNATURE_V1,
  HEADER_SIGNATURE_V2,
  HEADER_TIMESTAMP,
  type HeaderGetter,
  type HeaderValue,
  type WebhookHeaders,
} from './headers.js'
export type { WebhookInput } from './input.js'
export { ANSWERS, type AnswerName, type AnswerRow } from './answer-texts.js'
export { DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE_SECONDS, type SecretLookup, type Secrets, type VerifyOptions } from './options.js'
export type { SecretSource, SecretState } from './secrets/index.js'
export {
  createWebhookReceiver,
  type WebhookAnswerCode,
  type WebhookOutcome,
  type WebhookReceiver,
  type WebhookReceiverOptions,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookResult,
  type EndpointLookup,
  type WebhookStatsSource,
  type WebhookTransport,
} from './receiver.js'
export type { WebhookHandler, WebhookHandlers } from './contracts/handler.js'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js'
export {
  InboxError,
  isInboxError,
  type AppendResult,
  type DeadLetter,
  type FilingInbox,
  type InboxDelivery,
  type InboxEntry,
  type InboxErrorKind,
  type InboxOptions,
  type InboxStats,
  type WebhookInbox,
  type WebhookInboxProducer,
} from './contracts/inbox.js'
export { MemoryInbox, type MemoryInboxOptions } from './inbox/memory.js'
export { createInboxWorker, type InboxWorker, type InboxWorkerOptions, type InboxWorkerResult } from './inbox/worker.js'
export { byConversation, type OrderingKey, type OrderingOption } from './inbox/ordering.js'
export type { RateLimit } from './inbox/flow.js'
export type { Admission, FlowEngine, ModeEngine, OrderedEntry, OrderedTake, OrderedTakeOptions, OrderingEngine, PauseState, Placement, WorkerMode } from './contracts/ordering.js'
export type { ClaimResult, IdempotencyStore } from './contracts/store.js'
export { verifySignature, verifyWebhook, type VerifiedDelivery, type VerifiedSignature } from './verify.js'
export { DEFAULT_BODY_TIMEOUT_MS, discardNodeBody, readNodeBody, readRequestBody, type NodeBodyStream } from './read-body.js'
export type {
  HistoryEntry,
  HistoryOptions,
  HistoryOutcome,
  HistoryPage,
  HistoryQuery,
  HistoryStats,
  RefusalCount,
  ReplayResult,
  WebhookHistory,
} from './history/types.js'
