/**
 * `svc-webhooks/node`: a `(req, res)` handler for `http.createServer` (and anything built on
 * Node's IncomingMessage/ServerResponse). Supplies the core's request path with the method, a
 * header and the raw bytes of Node's request, and writes its answer; all policy lives in the core.
 * The Express, Fastify, Hono (on @hono/node-server) and Next.js Pages adapters reuse both.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  createWebhookReceiver,
  discardNodeBody,
  readNodeBody,
  type WebhookReceiverOptions,
  type WebhookResponse,
  type WebhookStatsSource,
  type WebhookTransport,
} from '../src/index.js'
import { toBytes } from '../src/input.js'

/** Options of {@link createNodeHandler}: the receiver's options. */
export type NodeHandlerOptions = WebhookReceiverOptions<IncomingMessage>

/** Node's request, with the `body` a framework's body reader may have left on it (Express, Next.js Pages). */
export type NodeRequest = IncomingMessage & { body?: unknown }

/**
 * The core's view of a Node request: its method, its headers (already lowercase), its stream, or
 * the bytes a raw-body reader (express.raw()) left. A stream read to its end is consumed, unless
 * those bytes are left; Express 4's body-parser sets `{}` on a request it skips, so an object
 * alone does not say the stream was read.
 */
export const nodeTransport: WebhookTransport<NodeRequest> = {
  method: (req) => req.method,
  header: (req, name) => req.headers[name],
  body: (req, maxBodyBytes, timeoutMs) => (req.body instanceof Uint8Array ? toBytes(req.body, maxBodyBytes) : readNodeBody(req, maxBodyBytes, timeoutMs)),
  consumed: (req) => !(req.body instanceof Uint8Array) && (req.readableEnded || (req.body !== undefined && typeof req.body !== 'object')),
  discard: discardNodeBody,
}

/** Writes a core answer to a Node response. */
export function sendNode(res: ServerResponse, answer: WebhookResponse): void {
  if (answer.close) res.setHeader('connection', 'close')
  res.writeHead(answer.status, answer.headers).end(answer.body)
}

/**
 * Creates a `node:http` request handler that verifies, deduplicates, dispatches and answers.
 *
 * @example
 * import { createServer } from 'node:http'
 * const handle = createNodeHandler({ secret: process.env.SVC_WEBHOOK_SECRET!, on: { 'message.received': save } })
 * createServer(handle).listen(3000, '127.0.0.1')
 */
export function createNodeHandler(options: NodeHandlerOptions): ((req: IncomingMessage, res: ServerResponse) => Promise<void>) & WebhookStatsSource {
  const receiver = createWebhookReceiver(options)
  const handle = async (req: IncomingMessage, res: ServerResponse) => sendNode(res, await receiver.receive(req, nodeTransport))
  return Object.assign(handle, { stats: () => receiver.stats(), replay: receiver.replay })
}
