/**
 * The event catalog (spec/service-api.md §6): typed payloads for the events the service ships,
 * and an open shape for the ones it adds later (the catalog only grows, §9).
 */

/** `message.received`: a new inbound chat message arrived in a conversation (spec §6.1). */
export interface MessageReceivedEvent {
  event: 'message.received'
  business_id: string
  conversation_id: string
  message: {
    id: string
    chat_id: string
    text: string
    from: string
    sender_type: string
    /** ISO 8601 with microseconds and offset; kept a string so no precision is lost. */
    created_at: string
  }
}

/**
 * Event type → payload. Augment it to type an event this version does not know yet:
 *
 * @example
 * declare module 'svc-webhooks' {
 *   interface WebhookEventMap { 'template.approved': { event: 'template.approved'; id: string } }
 * }
 */
export interface WebhookEventMap {
  'message.received': MessageReceivedEvent
}

/** An event type the installed version has no type for: `event` plus whatever the body holds. */
export interface UnknownWebhookEvent {
  event: string
  [field: string]: unknown
}

/** Any verified event: a known one, or one added to the catalog after this version. */
export type WebhookEvent = WebhookEventMap[keyof WebhookEventMap] | UnknownWebhookEvent

/** The event type names this version knows. */
export type WebhookEventType = keyof WebhookEventMap

/** The event types the service sends today (spec/service-api.md §6): an `on` key outside them is warned about. */
export const KNOWN_EVENT_TYPES = ['message.received'] as const satisfies readonly WebhookEventType[]

/**
 * Narrows a verified event to one type. A plain `event.event === 'message.received'` check cannot
 * narrow, because an event added after this version also has a string `event`.
 *
 * @example
 * const { event } = await verifyWebhook({ body, headers }, { secret })
 * if (isEventType(event, 'message.received')) console.log(event.message.text)
 */
export function isEventType<K extends WebhookEventType>(event: WebhookEvent, type: K): event is WebhookEventMap[K] {
  return event.event === type
}
