/**
 * `svc-webhooks/next`: Next.js route handlers. The App Router form (Node.js and Edge runtimes) is
 * the Fetch handler of `svc-webhooks/fetch`; the Pages Router form is the `node:http` handler of
 * `svc-webhooks/node` behind an API route: a body Next already consumed is refused by the core
 * like any other answer. All policy lives in the core.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { WebhookReceiverOptions, WebhookStatsSource } from '../src/index.js'
import { createFetchHandler, type FetchHandlerOptions } from './fetch.js'
import { createNodeHandler, type NodeHandlerOptions } from './node.js'

/** Options of {@link withWebhooks} and {@link withWebhooksPages}: the receiver's options. */
export type NextWebhookOptions = FetchHandlerOptions

/**
 * An App Router route handler that verifies, deduplicates, dispatches and answers. Runs on the
 * Node.js and the Edge runtime (HMAC through WebCrypto there, picked by export condition). A
 * request whose body was already read is answered 500 `body_already_parsed`, logged with the fix.
 *
 * @example
 * // app/webhooks/svc/route.ts
 * export const POST = withWebhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 */
export function withWebhooks(options: NextWebhookOptions): ((request: Request) => Promise<Response>) & WebhookStatsSource {
  return createFetchHandler(options)
}

/** A Pages Router API request: Node's request, with the `body` Next sets when its parser is on. */
export type PagesApiRequest = IncomingMessage & { body?: unknown }

/** Options of {@link withWebhooksPages}: the receiver's options; `secret` and `endpoint` functions get the Pages request. */
export type NextPagesWebhookOptions = WebhookReceiverOptions<PagesApiRequest>

/**
 * A Pages Router API route (`pages/api/*`) that verifies, deduplicates, dispatches and answers.
 * The route file must turn Next's body parser off; if it is on, the raw bytes are gone and the
 * request is answered 500 `body_already_parsed`, logged with the fix.
 *
 * @example
 * // pages/api/webhooks/svc.ts
 * export const config = { api: { bodyParser: false } }
 * export default withWebhooksPages({ secret: process.env.SVC_WEBHOOK_SECRET!, on: { 'message.received': save } })
 */
export function withWebhooksPages(options: NextPagesWebhookOptions): (req: PagesApiRequest, res: ServerResponse) => Promise<void> {
  // A Pages request is Node's request: the lookups get it as Next passes it.
  return createNodeHandler(options as NodeHandlerOptions)
}
