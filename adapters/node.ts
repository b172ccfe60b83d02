/**
 * `svc-webhooks/node`: a `(req, res)` handler for `http.createServer` (and anything built on
 * Node's IncomingMessage/ServerResponse). Reads the raw bytes with the size limit enforced while
 * streaming and writes the core's answer; all policy lives in the core.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  createWebhookReceiver,
  DEFAULT_MAX_BODY_BYTES,
  errorResponse,
  readStreamBody,
  type WebhookReceiverOptions,
  type WebhookResponse,
} from '../src/index.js'

/** Options of {@link createNodeHandler}: the receiver's options. */
export type NodeHandlerOptions = WebhookReceiverOptions

/** Writes a core answer to a Node response. */
function send(res: ServerResponse, answer: WebhookResponse): void {
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
export function createNodeHandler(options: NodeHandlerOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const receiver = createWebhookReceiver(options)
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  return async (req, res) => {
    const { method, headers } = req
    let body: Uint8Array = new Uint8Array(0)
    if (method === 'POST') {
      try {
        body = await readStreamBody(req, maxBodyBytes, req.headers['content-length'])
      } catch (error) {
        return send(res, errorResponse(error))
      }
    }
    send(res, await receiver.handle({ method, body, headers }))
  }
}
