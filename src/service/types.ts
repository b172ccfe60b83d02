/**
 * The service's webhook-endpoint API as types (spec/service-api.md §2.1, §4.1, §7): what
 * `createServiceClient` answers and what `rotateEndpointSecret`, `registerEndpoint` and
 * `watchEndpoint` need of it.
 */

/** A webhook endpoint (spec §2.1). `signing_secret` is present only when creating or rotating. */
export interface WebhookEndpoint {
  id: string
  label: string
  url: string
  subscribed_events: string[]
  enabled: boolean
  consecutive_failures: number
  last_error: string | null
  last_delivery_at: string | null
  created: string
  signing_secret?: string
}

/** The fields `POST /webhook-endpoints` takes. */
export interface CreateEndpointInput {
  label: string
  url: string
  /** Empty means every event in the catalog, including ones added later. */
  subscribed_events: string[]
}

/** The fields `PATCH /webhook-endpoints/{id}` takes; omitted fields are unchanged. */
export interface UpdateEndpointInput {
  label?: string
  url?: string
  subscribed_events?: string[]
  enabled?: boolean
}

/** One entry of a 422 validation answer (spec §7). */
export interface ValidationIssue {
  loc: Array<string | number>
  msg: string
  type: string
  ctx?: Record<string, unknown>
  input?: unknown
}

/** The service calls of spec §4.1, as `createServiceClient` returns them. */
export interface ServiceClient {
  endpoints: {
    list(): Promise<WebhookEndpoint[]>
    /** The answer holds `signing_secret`, shown this once. `timeoutMs` bounds each attempt of this call. */
    create(input: CreateEndpointInput, options?: { timeoutMs?: number }): Promise<WebhookEndpoint & { signing_secret: string }>
    update(endpointId: string, input: UpdateEndpointInput): Promise<WebhookEndpoint>
    remove(endpointId: string): Promise<void>
    /** The answer holds the new `signing_secret`; the old one stops verifying at once. `timeoutMs` bounds each attempt of this call. */
    rotateSecret(endpointId: string, options?: { timeoutMs?: number }): Promise<WebhookEndpoint & { signing_secret: string }>
    /** `PATCH { enabled: true }`: the service resets `consecutive_failures` to 0. */
    enable(endpointId: string): Promise<WebhookEndpoint>
    /** `PATCH { enabled: false }`. */
    disable(endpointId: string): Promise<WebhookEndpoint>
  }
  deliveries: {
    /** Replays the stored bytes with a fresh timestamp and signatures, in the background (202). */
    resend(deliveryId: string): Promise<Record<string, string>>
  }
}
