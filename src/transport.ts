/**
 * What an adapter supplies for its framework's request (the method, one header, the raw bytes,
 * whether something already read them). The receiver (src/receiver.ts) and verify-only mode
 * (src/verify-only.ts) drive the same transport.
 */
import type { HeaderGetter } from './headers.js'

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
