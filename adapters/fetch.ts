/**
 * `svc-webhooks/fetch`: the Web-standard entry, `(request: Request) => Promise<Response>`, for
 * Bun.serve, Deno.serve, SvelteKit, React Router/Remix, Astro, Nuxt. The Next.js, Hono and
 * Cloudflare adapters are layers over it. Supplies the core's request path with the method, a
 * header and the body stream of a `Request`; all policy lives in the core.
 */
import {
  createWebhookReceiver,
  readRequestBody,
  type VerifiedDelivery,
  type VerifyOptions,
  type WebhookReceiverOptions,
  type WebhookResponse,
  type WebhookStatsSource,
  type WebhookTransport,
} from '../src/index.js'
import { resolveVerifyOptions } from '../src/options.js'
import { verifyDelivery } from '../src/verify.js'

/** Options of {@link createFetchHandler}: the receiver's options. */
export type FetchHandlerOptions = WebhookReceiverOptions<Request>

/** The core's view of a Fetch `Request`. */
export const fetchTransport: WebhookTransport<Request> = {
  method: (request) => request.method,
  header: (request, name) => request.headers.get(name) ?? undefined,
  body: readRequestBody,
  // request.json(), text() or formData() ran first (in a Next.js route, say): the stream is gone.
  consumed: (request) => request.bodyUsed,
}

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
export function createFetchHandler(options: FetchHandlerOptions): ((request: Request) => Promise<Response>) & WebhookStatsSource {
  const receiver = createWebhookReceiver(options)
  const handle = async (request: Request) => toResponse(await receiver.receive(request, fetchTransport))
  return Object.assign(handle, { stats: () => receiver.stats(), replay: receiver.replay })
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
 * Verify-only: the header checks, the size-limited and deadline-limited read, and the signature;
 * throws `WebhookVerificationError`.
 *
 * @example
 * const delivery = await verifyRequest(request, { secret })
 */
export async function verifyRequest(request: Request, options: VerifyOptions<Request>): Promise<VerifiedDelivery> {
  return (await verifyDelivery(request, fetchTransport, resolveVerifyOptions(options), true)) as VerifiedDelivery
}
