/**
 * The handler contract: what the receiver, the inbox worker, the Queues consumer and the job-queue
 * engines call for each verified delivery. Nothing here runs; every layer that runs a handler
 * imports these types from here.
 */
import type { WebhookEventMap } from '../events.js'
import type { VerifiedDelivery } from '../verify.js'

/**
 * A handler for one event type: the typed event first, the verified delivery second.
 *
 * @example
 * const onMessage: WebhookHandler<MessageReceivedEvent> = async (event, delivery) => saveMessage(event.message, delivery.id)
 */
export type WebhookHandler<E = WebhookEventMap[keyof WebhookEventMap]> = (
  event: E,
  delivery: VerifiedDelivery<E>,
) => unknown

/**
 * Handlers by event type. A type with no handler is answered 2xx and ignored (the catalog grows).
 *
 * @example
 * const on: WebhookHandlers = { 'message.received': async (event) => saveMessage(event.message) }
 */
export type WebhookHandlers = { [K in keyof WebhookEventMap]?: WebhookHandler<WebhookEventMap[K]> }
