/**
 * Reading a request body as raw bytes, bounded in size and in time (DESIGN.md rule 8 and the
 * read deadline): a declared Content-Length over the limit is refused before reading anything, a
 * stream is abandoned as soon as it passes the limit, and a body still arriving when the deadline
 * passes is abandoned with `body_timeout` (503, retried), so a stalled sender cannot hold memory
 * or a connection for minutes. One reader for Node streams, one for Web streams.
 */
import { WebhookVerificationError } from './errors.js'
import { bodyAlreadyParsed, tooLarge } from './input.js'

/** The read deadline's default: the sender's own timeout (spec/service-api.md §6.3), 10 s. */
export const DEFAULT_BODY_TIMEOUT_MS = 10_000

/** Joins chunks into one buffer (no copy for a single chunk). */
function join(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!
  const out = new Uint8Array(total)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

/** True when a Content-Length header declares more than `maxBodyBytes`. */
export function declaresTooMuch(value: string | readonly string[] | null | undefined, maxBodyBytes: number): boolean {
  if (value == null || value === '' || typeof value !== 'string') return false
  const declared = Number(value)
  return Number.isFinite(declared) && declared > maxBodyBytes
}

export function bodyTimeout(timeoutMs: number): WebhookVerificationError {
  return new WebhookVerificationError('body_timeout', `The body was still arriving after ${timeoutMs} ms (bodyTimeoutMs).`)
}

const encoder = /* @__PURE__ */ new TextEncoder()

/** The part of a Node.js `IncomingMessage` (or any Readable) the reader uses. */
export interface NodeBodyStream {
  on(event: string, listener: (...args: any[]) => void): unknown
  removeListener(event: string, listener: (...args: any[]) => void): unknown
  resume(): unknown
  destroy(error?: Error): unknown
  readonly readableEnded?: boolean
}

/** Most bytes of a refused body read and dropped before the connection is closed instead. */
const DISCARD_MAX_BYTES = 64 * 1024 * 1024
const DISCARDING = Symbol.for('svc-webhooks.discarding')

/**
 * Reads and drops the rest of a body that will not be used (refused before or while reading), so
 * the answer reaches the client: closing a socket with unread bytes makes TCP send a reset, which
 * a client still writing sees as a broken pipe instead of the answer. Bounded in time and bytes:
 * past `timeoutMs` or 64 MiB the stream is destroyed, so a stalled or endless body cannot hold the
 * connection. Does nothing for a stream already read to its end.
 *
 * @example
 * discardNodeBody(req, 10_000) // after answering 401 without reading the body
 */
export function discardNodeBody(stream: NodeBodyStream, timeoutMs = DEFAULT_BODY_TIMEOUT_MS): void {
  const marked = stream as NodeBodyStream & { [DISCARDING]?: true }
  if (stream.readableEnded || marked[DISCARDING]) return
  marked[DISCARDING] = true
  let seen = 0
  const stop = () => {
    clearTimeout(timer)
    stream.removeListener('data', onData)
    stream.removeListener('end', stop)
    stream.removeListener('close', stop)
  }
  const onData = (chunk: Uint8Array | string) => {
    seen += chunk.length
    if (seen > DISCARD_MAX_BYTES) {
      stop()
      stream.destroy()
    }
  }
  const timer = setTimeout(() => {
    stop()
    if (!stream.readableEnded) stream.destroy()
  }, timeoutMs)
  ;(timer as { unref?: () => void }).unref?.()
  stream.on('data', onData)
  stream.on('end', stop)
  stream.on('close', stop)
  stream.resume()
}

/**
 * Reads a Node.js stream (`IncomingMessage`) up to `maxBodyBytes` within `timeoutMs`. Past the
 * limit it rejects with `body_too_large`, past the deadline with `body_timeout` (checked by a
 * shared sweep every 250 ms, so at most that much later); either way the
 * rest of the body is read and dropped in the background (bounded by `timeoutMs`) so the answer
 * reaches the client.
 *
 * @example
 * const body = await readNodeBody(req, 1024 * 1024, 10_000)
 */
export function readNodeBody(stream: NodeBodyStream, maxBodyBytes: number, timeoutMs = DEFAULT_BODY_TIMEOUT_MS): Promise<Uint8Array> {
  // A stream already read to its end would never emit 'end' again: the adapters' transports say
  // so first (`consumed`), this guards a direct call.
  if (stream.readableEnded) return Promise.reject(bodyAlreadyParsed())
  return new Promise<Uint8Array>((resolve, reject) => {
    const chunks: Uint8Array[] = []
    let total = 0
    let settled = false
    const read: PendingRead = { deadline: Date.now() + timeoutMs, expire: () => stop(bodyTimeout(timeoutMs)) }
    const stop = (error: Error | undefined) => {
      if (settled) return
      settled = true
      pending.delete(read)
      if (error === undefined) return resolve(join(chunks, total))
      // A body that stopped early: its listeners go, and the rest is read and dropped.
      stream.removeListener('data', onData)
      stream.removeListener('end', onEnd)
      stream.removeListener('error', onError)
      stream.removeListener('close', onClose)
      chunks.length = 0
      discardNodeBody(stream, timeoutMs)
      reject(error)
    }
    // After a normal end the stream emits nothing but 'close', which `settled` ignores: its
    // listeners are left to go with it rather than removed one by one on every request.
    const onData = (part: Uint8Array | string) => {
      if (settled) return
      const chunk = typeof part === 'string' ? encoder.encode(part) : part
      total += chunk.byteLength
      if (total > maxBodyBytes) return stop(tooLarge(maxBodyBytes))
      chunks.push(chunk)
    }
    const onEnd = () => stop(undefined)
    const onError = (error: Error) => stop(error)
    const onClose = () => {
      if (!settled) stop(new Error('svc-webhooks: the client closed the connection before the body was complete.'))
    }
    watch(read)
    stream.on('data', onData)
    stream.on('end', onEnd)
    stream.on('error', onError)
    stream.on('close', onClose)
  })
}

/** A read with a deadline, watched by the shared sweeper. */
interface PendingRead {
  deadline: number
  expire(): void
}

/**
 * Reads still in progress. One interval checks their deadlines (a timer per request costs more
 * than the read itself on a fast server): a read is abandoned within `SWEEP_MS` after its
 * deadline, and the interval stops when nothing is pending.
 */
const pending = new Set<PendingRead>()
const SWEEP_MS = 250
let sweeper: ReturnType<typeof setInterval> | undefined

function watch(read: PendingRead): void {
  pending.add(read)
  if (sweeper !== undefined) return
  sweeper = setInterval(sweep, SWEEP_MS)
  ;(sweeper as { unref?: () => void }).unref?.()
}

function sweep(): void {
  const now = Date.now()
  for (const read of pending) if (read.deadline <= now) read.expire()
  if (pending.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper)
    sweeper = undefined
  }
}

/**
 * Reads a Fetch `Request` body up to `maxBodyBytes` within `timeoutMs`, cancelling the stream once
 * it is over either. The declared Content-Length is only used to refuse early: a `Request` built
 * in-process (a proxy, a wrapper) may declare anything, so the bytes are counted as they arrive.
 *
 * @example
 * const body = await readRequestBody(request, 1024 * 1024)
 */
export async function readRequestBody(request: Request, maxBodyBytes: number, timeoutMs = DEFAULT_BODY_TIMEOUT_MS): Promise<Uint8Array> {
  if (declaresTooMuch(request.headers.get('content-length'), maxBodyBytes)) throw tooLarge(maxBodyBytes)
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  let timedOut = false
  // Cancelling makes the pending read() resolve as done: no race of promises per chunk.
  const timer = setTimeout(() => {
    timedOut = true
    reader.cancel().catch(() => undefined)
  }, timeoutMs)
  const chunks: Uint8Array[] = []
  let total = 0
  try {
    for (;;) {
      const { done, value } = await reader.read().catch((error: unknown) => {
        throw timedOut ? bodyTimeout(timeoutMs) : error
      })
      if (timedOut) throw bodyTimeout(timeoutMs)
      if (done) break
      total += value.byteLength
      if (total > maxBodyBytes) {
        await reader.cancel().catch(() => undefined)
        throw tooLarge(maxBodyBytes)
      }
      chunks.push(value)
    }
  } finally {
    clearTimeout(timer)
  }
  return join(chunks, total)
}
