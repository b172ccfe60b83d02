/**
 * `svc-webhooks/next`: Next.js route handlers. The App Router form (Node.js and Edge runtimes) is
 * the Fetch handler of `svc-webhooks/fetch`; the Pages Router form is the `node:http` handler of
 * `svc-webhooks/node` behind an API route. Both only refuse a body Next already consumed; all
 * policy lives in the core.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { WebhookVerificationError, type WebhookReceiverOptions, type WebhookStatsSource } from '../src/index.js'
import { createFetchHandler, type FetchHandlerOptions } from './fetch.js'
import { createNodeHandler, type NodeHandlerOptions } from './node.js'

/** Options of {@link withWebhooks} and {@link withWebhooksPages}: the receiver's options. */
export type NextWebhookOptions = FetchHandlerOptions

const READ =
  'svc-webhooks/next: the request body was already read (request.json(), request.text() or formData()), ' +
  'so the raw bytes the signature covers are gone. Export the handler directly: export const POST = withWebhooks(options).'

const PARSED =
  'svc-webhooks/next: Next.js parsed the body of this API route, so the raw bytes the signature covers are gone. ' +
  'Turn its body parser off in the route file: export const config = { api: { bodyParser: false } }.'

/**
 * An App Router route handler that verifies, deduplicates, dispatches and answers. Runs on the
 * Node.js and the Edge runtime (HMAC through WebCrypto there, picked by export condition). A
 * request whose body was already read is thrown as a `body_already_parsed` error (Next answers 500).
 *
 * @example
 * // app/webhooks/svc/route.ts
 * export const POST = withWebhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 */
export function withWebhooks(options: NextWebhookOptions): ((request: Request) => Promise<Response>) & WebhookStatsSource {
  const handle = createFetchHandler(options)
  const route = async (request: Request) => {
    if (request.bodyUsed) throw new WebhookVerificationError('body_already_parsed', READ)
    return handle(request)
  }
  return Object.assign(route, { stats: handle.stats })
}

/** A Pages Router API request: Node's request, with the `body` Next sets when its parser is on. */
export type PagesApiRequest = IncomingMessage & { body?: unknown }

/** Options of {@link withWebhooksPages}: the receiver's options; `secret` and `endpoint` functions get the Pages request. */
export type NextPagesWebhookOptions = WebhookReceiverOptions<PagesApiRequest>

/**
 * A Pages Router API route (`pages/api/*`) that verifies, deduplicates, dispatches and answers.
 * The route file must turn Next's body parser off; if it is on, the raw bytes are gone and the
 * request is thrown as a `body_already_parsed` error (Next logs the fix and answers 500).
 *
 * @example
 * // pages/api/webhooks/svc.ts
 * export const config = { api: { bodyParser: false } }
 * export default withWebhooksPages({ secret: process.env.SVC_WEBHOOK_SECRET!, on: { 'message.received': save } })
 */
export function withWebhooksPages(options: NextPagesWebhookOptions): (req: PagesApiRequest, res: ServerResponse) => Promise<void> {
  // A Pages request is Node's request: the lookups get it as Next passes it.
  const handle = createNodeHandler(options as NodeHandlerOptions)
  return async (req, res) => {
    if (req.method === 'POST' && (req.body !== undefined || req.readableEnded)) {
      throw new WebhookVerificationError('body_already_parsed', PARSED)
    }
    return handle(req, res)
  }
}
