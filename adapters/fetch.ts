/**
 * `svc-webhooks/fetch`: the Web-standard entry, `(request: Request) => Promise<Response>`, for
 * Bun.serve, Deno.serve, SvelteKit, React Router/Remix, Astro, Nuxt. The Next.js and Cloudflare
 * adapters are layers over it. Only translation here: all policy lives in the core.
 */
import {
  createWebhookReceiver,
  DEFAULT_MAX_BODY_BYTES,
  errorResponse,
  readRequestBody,
  verifyWebhook,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookReceiverOptions,
  type WebhookResponse,
} from '../src/index.js'

/** Options of {@link createFetchHandler}: the receiver's options. */
export type FetchHandlerOptions = WebhookReceiverOptions

/**
 * Copies a core answer into a Fetch `Response`.
 *
 * @example
 * catch (error) {
 *   return toResponse(errorResponse(error)) // e.g. 413 {"ok":false,"code":"body_too_large"}
 * }
 */
export function toResponse(answer: WebhookResponse): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers })
}

/**
 * Creates a Fetch handler that verifies, deduplicates, dispatches and answers.
 *
 * @example
 * const handle = createFetchHandler({ secret: process.env.SVC_WEBHOOK_SECRET!, on: { 'message.received': save } })
 * Bun.serve({ port: 3000, fetch: handle })
 */
export function createFetchHandler(options: FetchHandlerOptions): (request: Request) => Promise<Response> {
  const receiver = createWebhookReceiver(options)
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  return async (request) => {
    const { method, headers } = request
    if (method !== 'POST') return toResponse(await receiver.handle({ method, body: new Uint8Array(0), headers }))
    let body: Uint8Array
    try {
      body = await readRequestBody(request, maxBodyBytes)
    } catch (error) {
      return toResponse(errorResponse(error))
    }
    return toResponse(await receiver.handle({ method, body, headers }))
  }
}

const handlers = new WeakMap<FetchHandlerOptions, (request: Request) => Promise<Response>>()

/**
 * One-call form of {@link createFetchHandler}: the receiver is created on the first call for an
 * options object and reused after, so keep the options object at module scope.
 *
 * @example
 * const options = { secret, on: { 'message.received': save } }
 * export default { fetch: (request: Request) => handleRequest(request, options) }
 */
export function handleRequest(request: Request, options: FetchHandlerOptions): Promise<Response> {
  let handler = handlers.get(options)
  if (!handler) {
    handler = createFetchHandler(options)
    handlers.set(options, handler)
  }
  return handler(request)
}

/**
 * Verify-only: reads the body (size-limited) and verifies it; throws `WebhookVerificationError`.
 *
 * @example
 * const delivery = await verifyRequest(request, { secret })
 */
export async function verifyRequest(request: Request, options: VerifyOptions): Promise<VerifiedDelivery> {
  const body = await readRequestBody(request, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)
  return verifyWebhook({ body, headers: request.headers }, options)
}
