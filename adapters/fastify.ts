/**
 * `svc-webhooks/fastify`: a Fastify plugin that registers the webhook route. The core's request
 * path runs in the route's `onRequest` hook on Node's own request, before Fastify parses
 * anything: whatever the content type, the delivery reaches the core (never Fastify's 415), and
 * the core's limits and read deadline apply. The app's other routes keep their parsers.
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { createWebhookReceiver, type WebhookReceiverOptions, type WebhookTransport } from '../src/index.js'
import { nodeTransport } from './node.js'

/** Options of {@link webhooksPlugin}: the receiver's options and the route's path. */
export interface FastifyWebhooksOptions extends WebhookReceiverOptions<FastifyRequest> {
  /**
   * Path of the webhook route, under the plugin's `prefix` if one is given.
   * @default '/'
   */
  path?: string
}

/** Fastify's request, read through Node's own (`request.raw`): Fastify never parses the body. */
const fastifyTransport: WebhookTransport<FastifyRequest> = {
  method: (request) => request.raw.method,
  header: (request, name) => request.raw.headers[name],
  body: (request, maxBodyBytes, timeoutMs) => nodeTransport.body(request.raw, maxBodyBytes, timeoutMs),
  discard: (request, timeoutMs) => nodeTransport.discard!(request.raw, timeoutMs),
}

/**
 * Registers the webhook route: verifies, deduplicates, runs the handler and answers. Register it
 * with `{ path, secret, on }`.
 *
 * @example
 * await app.register(webhooksPlugin, {
 *   path: '/webhooks/svc',
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 */
export const webhooksPlugin: FastifyPluginAsync<FastifyWebhooksOptions> = async (app, { path = '/', ...options }) => {
  const receiver = createWebhookReceiver(options)
  app.all(path, {
    onRequest: async (request, reply) => {
      const answer = await receiver.receive(request, fastifyTransport)
      // Through Fastify's reply, not Node's response: the app's onSend hooks (CORS, security
      // headers, logging) run on this route as on every other.
      if (answer.close) reply.header('connection', 'close')
      return reply.code(answer.status).headers(answer.headers).send(answer.body)
    },
    // Never reached: onRequest always answers.
    handler: async (_request, reply) => reply,
  })
}

export default webhooksPlugin
