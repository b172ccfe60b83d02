/**
 * Reading a captured request for `verify`: a headers file (JSON, `Name: value` lines, `curl -v`
 * output or `-H 'Name: value'` flags) plus a body file, or one raw HTTP request file. The body
 * is kept as the exact bytes in the file: nothing is decoded or re-serialized.
 */
import { UsageError } from './command.js'

export type CapturedHeaders = Record<string, string | string[]>

/** A header section (or a JSON object of headers) to a record with lowercase names. */
export function parseHeaders(text: string): CapturedHeaders {
  const trimmed = text.trim()
  if (trimmed.startsWith('{')) return parseJsonHeaders(trimmed)
  const headers: CapturedHeaders = {}
  const flags = [...trimmed.matchAll(/(?:^|\s)(?:-H|--header)\s+(?:'([^']*)'|"((?:[^"\\]|\\.)*)")/g)]
  const lines = flags.length > 0 ? flags.map((m) => m[1] ?? m[2]!.replace(/\\(.)/g, '$1')) : trimmed.split(/\r?\n/)
  for (let line of lines) {
    line = line.replace(/^[<>] /, '') // `curl -v` output
    if (line.trim() === '' || /^[A-Z]+ \S+ HTTP\/[\d.]+$/.test(line) || /^HTTP\/[\d.]+ \d{3}/.test(line)) continue
    const colon = line.indexOf(':')
    if (colon <= 0) throw new UsageError(`the headers file has a line that is not "Name: value": ${JSON.stringify(line.slice(0, 60))}`)
    add(headers, line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  return headers
}

function parseJsonHeaders(text: string): CapturedHeaders {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new UsageError('the headers file starts with "{" but is not JSON.')
  }
  const headers: CapturedHeaders = {}
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    const values = Array.isArray(value) ? value : [value]
    for (const v of values) {
      if (typeof v !== 'string' && typeof v !== 'number') throw new UsageError(`header "${name}" in the JSON headers file is not a string.`)
      add(headers, name, String(v))
    }
  }
  return headers
}

function add(headers: CapturedHeaders, name: string, value: string): void {
  const key = name.toLowerCase()
  const existing = headers[key]
  if (existing === undefined) headers[key] = value
  else headers[key] = Array.isArray(existing) ? [...existing, value] : [existing, value]
}

/**
 * A raw HTTP/1.1 request: request line, headers, blank line, body (Content-Length or chunked
 * honoured). `target` is the request line's path, e.g. `/tenants/acme/webhooks`: on a receiver
 * of many endpoints it names the endpoint whose secret must verify the delivery.
 */
export function parseRawRequest(bytes: Uint8Array): { headers: CapturedHeaders; body: Uint8Array; notes: string[]; target: string } {
  const text = new TextDecoder('latin1').decode(bytes) // one char per byte, so indexes are byte offsets
  const crlf = text.indexOf('\r\n\r\n')
  const lf = text.indexOf('\n\n')
  let end: number
  let sep: number
  if (crlf >= 0 && (lf < 0 || crlf < lf)) [end, sep] = [crlf, 4]
  else if (lf >= 0) [end, sep] = [lf, 2]
  else throw new UsageError('the request file has no blank line between the headers and the body.')
  const lines = text.slice(0, end).split(/\r?\n/)
  if (!/^[A-Z]+ \S+ HTTP\/[\d.]+$/.test(lines[0] ?? '')) {
    throw new UsageError('the request file must start with a request line such as "POST /webhooks/svc HTTP/1.1".')
  }
  const target = lines[0]!.split(' ')[1]!
  const headers = parseHeaders(lines.slice(1).join('\n'))
  let body = bytes.subarray(end + sep)
  const notes: string[] = []
  const encoding = headers['transfer-encoding']
  const length = headers['content-length']
  if (typeof encoding === 'string' && encoding.toLowerCase().includes('chunked')) {
    body = dechunk(body)
  } else if (typeof length === 'string' && /^\d+$/.test(length)) {
    const declared = Number(length)
    if (body.byteLength > declared) {
      notes.push(`the file holds ${body.byteLength - declared} byte(s) after the declared Content-Length (${declared}); they were left out`)
      body = body.subarray(0, declared)
    } else if (body.byteLength < declared) {
      notes.push(`the body is ${body.byteLength} bytes but Content-Length says ${declared}: the capture looks truncated`)
    }
  }
  return { headers, body, notes, target }
}

/** Decodes a chunked body (bounded by its own length: each chunk moves forward). */
function dechunk(data: Uint8Array): Uint8Array {
  const text = new TextDecoder('latin1').decode(data)
  const parts: Uint8Array[] = []
  let at = 0
  while (at < text.length) {
    const lineEnd = text.indexOf('\n', at)
    if (lineEnd < 0) break
    const size = Number.parseInt(text.slice(at, lineEnd).trim().split(';')[0]!, 16)
    if (!Number.isFinite(size)) throw new UsageError('the request file says Transfer-Encoding: chunked but a chunk size is not hex.')
    if (size === 0) break
    parts.push(data.subarray(lineEnd + 1, lineEnd + 1 + size))
    at = lineEnd + 1 + size
    at = text.startsWith('\r\n', at) ? at + 2 : text.startsWith('\n', at) ? at + 1 : at
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}
