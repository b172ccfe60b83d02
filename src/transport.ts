/**
 * What an adapter supplies for its framework's request (the method, one header, the raw bytes,
 * whether something already read them), and verify-only mode: the core's verification through a
 * transport, with the refusal already turned into its answer, so a middleware that only verifies
 * has nothing to decide either. The receiver (src/receiver.ts) drives the same transport.
 */
import type { WebhookResponse } from './answers.js'
import type { HeaderGetter } from './headers.js'
import { resolveVerifyOptions, type VerifyOptions } from './options.js'
import { errorResponse } from './errors.js'
import { verifyDelivery, type VerifiedDelivery } from './verify.js'

/**
 * What an adapter supplies for its framework's request type `R`: the method, one header, and the
 * raw bytes. Everything else (the order of the checks, the limits, the deadline, the answer) is
 * the core's. Create it once, not per request.
 *
 * @example
 * const transport: WebhookTransport<IncomingMessage> = {
 *   method: (req) => req.method,
 *   header: (req, name) => req.headers[name],
 *   body: (req, maxBodyBytes, timeoutMs) => readNodeBody(req, maxBodyBytes, timeoutMs),
 *   consumed: (req) => req.readableEnded,
 * }
 * const answer = await receiver.receive(req, transport)
 */
export interface WebhookTransport<R> {
  method(request: R): string | undefined
  /** Header `name` (lowercase); a repeated header as an array. */
  header: HeaderGetter<R>
  /** The raw body as received: at most `maxBodyBytes`, within `timeoutMs` (reject with the core's errors). */
  body(request: R, maxBodyBytes: number, timeoutMs: number): Promise<Uint8Array> | Uint8Array
  /**
   * Whether something (a body parser, an earlier middleware) already read the body, so the raw
   * bytes are gone. The core refuses such a request as `body_already_parsed` (500) before
   * anything else, answered, logged and counted like every other refusal.
   */
  consumed?(request: R): boolean
  /**
   * Called once the answer is ready: drop whatever of the body was not read (a request refused
   * before its body), bounded by `timeoutMs`, so the answer reaches a client still writing.
   */
  discard?(request: R, timeoutMs: number): void
}

/** Verify-only mode's result: the delivery, or why it was refused and the answer for it. */
export type Verification =
  | { delivery: VerifiedDelivery; error?: undefined; answer?: undefined }
  | { delivery?: undefined; error: unknown; answer: WebhookResponse }

/**
 * Verify-only mode for a framework's middleware: options checked now (a `TypeError` here, not on
 * the first request); per request the core's verification, and on a refusal the rest of the body
 * dropped and the answer of the table (a `WebhookVerificationError`'s own, anything else 500
 * `internal_error`), for the framework's error path. Never rejects.
 *
 * @example
 * const verify = createVerifier(options)
 * const { delivery, error, answer } = await verify(req, nodeTransport)
 * if (error) return next(error)
 */
export function createVerifier<R>(options: VerifyOptions<R>): (request: R, transport: WebhookTransport<R>) => Promise<Verification> {
  const opts = resolveVerifyOptions(options)
  return async (request, transport) => {
    try {
      const verified = verifyDelivery(request, transport, opts, true)
      return { delivery: (verified instanceof Promise ? await verified : verified) as VerifiedDelivery }
    } catch (error) {
      transport.discard?.(request, opts.bodyTimeoutMs)
      return { error, answer: errorResponse(error) }
    }
  }
}
