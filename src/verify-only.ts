/**
 * Verify-only mode, for a framework's middleware that verifies and hands the delivery on (no
 * `on`, no `inbox`): the core's verification through a transport, with a refusal already turned
 * into its answer and its log line, so the middleware has nothing to decide either.
 */
import type { WebhookResponse } from './answers.js'
import { answerNameOf, errorResponse } from './errors.js'
import { createLogWindow } from './log-window.js'
import { resolveVerifyOptions, type VerifyOptions } from './options.js'
import type { WebhookTransport } from './transport.js'
import { verifyDelivery, type VerifiedDelivery, type VerifyProgress } from './verify.js'
import { resolveLog, resultLine, type WebhookLog } from './visibility.js'

/** Verify-only mode's result: the delivery, or why it was refused and the answer for it. */
export type Verification =
  | { delivery: VerifiedDelivery; error?: undefined; answer?: undefined }
  | { delivery?: undefined; error: unknown; answer: WebhookResponse }

/**
 * Verify-only mode for a framework's middleware: options checked now (a `TypeError` here, not on
 * the first request); per request the core's verification, and on a refusal the rest of the body
 * dropped, the line receiver mode writes (through the same window: one line per code, repeats
 * summarised; `log` as in receiver mode), and the answer of the table (a
 * `WebhookVerificationError`'s own, anything else 500 `internal_error`), for the framework's
 * error path. Never rejects.
 *
 * @example
 * const verify = createVerifier(options)
 * const { delivery, error, answer } = await verify(req, nodeTransport)
 * if (error) return next(error)
 */
export function createVerifier<R>(options: VerifyOptions<R> & { log?: WebhookLog }): (request: R, transport: WebhookTransport<R>) => Promise<Verification> {
  const opts = resolveVerifyOptions(options)
  const log = resolveLog(options.log)
  // The middleware's error path answers, but the person reading the log is the one who can fix
  // a wrong secret or a proxy that drops headers: a refusal is logged as in receiver mode.
  const lines = log ? createLogWindow(log, { now: opts.now, hint: 'Each one also went to your error handler.' }) : undefined
  return async (request, transport) => {
    const progress: VerifyProgress = {}
    try {
      const verified = verifyDelivery(request, transport, opts, true, progress)
      return { delivery: (verified instanceof Promise ? await verified : verified) as VerifiedDelivery }
    } catch (error) {
      transport.discard?.(request, opts.bodyTimeoutMs)
      const answer = errorResponse(error)
      if (lines) {
        const code = answerNameOf(error)
        const result = { outcome: 'refused' as const, status: answer.status, code, id: progress.signed?.id, error }
        lines.write(`${answer.status} ${code}`, resultLine(result) ?? `svc-webhooks: ${answer.status} ${code}`, result.id)
      }
      return { error, answer }
    }
  }
}
