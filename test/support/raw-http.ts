/**
 * Raw HTTP/1.1 over node:net for tests that need what fetch cannot do: exact header bytes (an
 * empty Content-Type), a body shorter than its Content-Length followed by a stall, a whole request
 * written in ONE socket write, or a client that reads only once it has written everything. Every
 * exchange has a bounded wait, and every socket is tracked so `destroyRawSockets()` (afterAll)
 * closes whatever is left.
 */
import net from 'node:net'

/** How an exchange ended. */
export type RawOutcome =
  /** A whole answer (status line, headers and body) was read. */
  | 'answered'
  /** The server closed the connection (FIN) before a whole answer was read. */
  | 'closed'
  /** Nothing decisive within `waitMs`: the connection is still open and unanswered. */
  | 'timeout'
  /** A socket error code (ECONNRESET, EPIPE, ...) before a whole answer was read. */
  | (string & {})

export interface RawResponse {
  outcome: RawOutcome
  /** The status of the answer's status line, when one was read (even if the body was cut short). */
  status?: number
  /** Response headers, lowercased names. */
  headers: Record<string, string>
  /** The response body (de-chunked), as text. */
  body: string
  /** The body parsed as JSON, when it is JSON. */
  json?: Record<string, unknown>
}

export interface RawExchangeOptions {
  /** The whole request (head, and body if any), written in ONE `socket.write` call. */
  request: Buffer
  /** Upper bound of the wait for an answer, in milliseconds. */
  waitMs: number
  /**
   * Behave like a blocking client: do not read anything until the whole request has been handed
   * to the kernel (the write callback), as clients that send the body and then read the answer do.
   * @default false
   */
  readAfterWrite?: boolean
}

const sockets = new Set<net.Socket>()

/** Destroys every socket this module opened that is still open (call it in afterAll). */
export function destroyRawSockets(): void {
  for (const socket of sockets) socket.destroy()
  sockets.clear()
}

export interface RawRequestOptions {
  method?: string
  path: string
  /** Header lines in order; `undefined` values are left out. Write an empty value to send `Name: `. */
  headers?: Record<string, string | undefined>
  /** The body bytes sent (may be fewer than `contentLength` to simulate a stalled sender). */
  body?: Buffer
  /** The declared Content-Length. @default body.length (omitted when `chunked`) */
  contentLength?: number
  /** Frame `body` as one chunk of a chunked body, with the terminating chunk. */
  chunked?: boolean
}

/** Builds the bytes of an HTTP/1.1 request. */
export function rawRequest({ method = 'POST', path, headers = {}, body = Buffer.alloc(0), contentLength, chunked = false }: RawRequestOptions): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1']
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) lines.push(`${name}: ${value}`)
  if (chunked) lines.push('Transfer-Encoding: chunked')
  else lines.push(`Content-Length: ${contentLength ?? body.length}`)
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1')
  if (!chunked) return Buffer.concat([head, body])
  return Buffer.concat([head, Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')])
}

/** Decodes a chunked body; undefined while the terminating chunk has not arrived. */
function dechunk(raw: Buffer): Buffer | undefined {
  const parts: Buffer[] = []
  let at = 0
  for (let guard = 0; guard < 100_000; guard++) {
    const eol = raw.indexOf('\r\n', at)
    if (eol < 0) return undefined
    const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16)
    if (!Number.isFinite(size)) return undefined
    if (size === 0) return Buffer.concat(parts)
    if (raw.length < eol + 2 + size + 2) return undefined
    parts.push(raw.subarray(eol + 2, eol + 2 + size))
    at = eol + 2 + size + 2
  }
  return undefined
}

/** Parses what was read so far: status and headers once the head is in, body once it is whole. */
function parse(data: Buffer): { status?: number; headers: Record<string, string>; body?: Buffer } {
  const end = data.indexOf('\r\n\r\n')
  if (end < 0) return { headers: {} }
  const [statusLine = '', ...headerLines] = data.subarray(0, end).toString('latin1').split('\r\n')
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)
  const headers: Record<string, string> = {}
  for (const line of headerLines) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const status = match ? Number(match[1]) : undefined
  const rest = data.subarray(end + 4)
  if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) return { status, headers, body: dechunk(rest) }
  const length = Number(headers['content-length'] ?? 0)
  return { status, headers, body: rest.length >= length ? rest.subarray(0, length) : undefined }
}

/**
 * Connects to `url`'s host and port, writes `request` in one write and waits (at most `waitMs`)
 * for a whole answer, the connection's end, or an error. The socket is destroyed afterwards.
 */
export function rawExchange(url: string, { request, waitMs, readAfterWrite = false }: RawExchangeOptions): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname)
    sockets.add(socket)
    let data = Buffer.alloc(0)
    let settled = false
    const finish = (outcome: RawOutcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      sockets.delete(socket)
      const parsed = parse(data)
      const body = parsed.body?.toString('utf8') ?? ''
      let json: Record<string, unknown> | undefined
      try {
        json = body.startsWith('{') ? (JSON.parse(body) as Record<string, unknown>) : undefined
      } catch {
        json = undefined
      }
      resolve({ outcome, status: parsed.status, headers: parsed.headers, body, json })
    }
    const timer = setTimeout(() => finish('timeout'), waitMs)
    if (readAfterWrite) socket.pause()
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      if (parse(data).body !== undefined) finish('answered')
    })
    socket.on('end', () => finish('closed'))
    socket.on('close', () => finish('closed'))
    socket.on('error', (error: NodeJS.ErrnoException) => finish(error.code ?? error.message))
    socket.once('connect', () => {
      socket.write(request, (error) => {
        if (!error && readAfterWrite) socket.resume()
      })
    })
  })
}
