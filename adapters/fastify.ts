/**
 * `svc-webhooks/fastify`: a Fastify plugin that registers the webhook route in its own
 * encapsulated context, with a raw-buffer content-type parser (so the app's other routes keep
 * JSON parsing) and `bodyLimit` = `maxBodyBytes` (so Fastify refuses oversize bodies while
 * streaming). Fastify's own refusals are mapped to the core's answers; all policy lives in the core.
 */
import type { FastifyError, FastifyPluginAsync, FastifyReply } from 'fastify'
import {
  createWebhookReceiver,
  DEFAULT_MAX_BODY_BYTES,
  errorResponse,
  WebhookVerificationError,
  type WebhookReceiverOptions,
  type WebhookResponse,
} from '../src/index.js'

/** Options of {@link webhooksPlugin}: the receiver's options and the route's path. */
export interface FastifyWebhooksOptions extends WebhookReceiverOptions {
  /**
   * Path of the webhook route, under the plugin's `prefix` if one is given.
   * @default '/'
   */
  path?: string
}

function send(reply: FastifyReply, answer: WebhookResponse): FastifyReply {
  return reply.code(answer.status).headers(answer.headers).send(answer.body)
}

/**
 * Registers the webhook route: verifies, deduplicates, runs the handler and answers. Register it
 * with `{ path, secret, on }`; it must not be wrapped in `fastify-plugin`, its parser is scoped to it.
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
  const bodyLimit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
  app.setErrorHandler((error: FastifyError, _request, reply) => {
    if (error.code !== 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.send(error)
    const tooLarge = new WebhookVerificationError('body_too_large', `The body is larger than maxBodyBytes (${bodyLimit} bytes).`)
    return send(reply, errorResponse(tooLarge))
  })
  app.all(path, { bodyLimit }, async (request, reply) => {
    const { method, headers } = request
    const body = request.body instanceof Uint8Array ? request.body : new Uint8Array(0)
    return send(reply, await receiver.handle({ method, body, headers }))
  })
}

export default webhooksPlugin
