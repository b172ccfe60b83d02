/**
 * The server of bench/read-body.mjs: one Fetch handler, served by Bun.serve, Deno.serve or
 * node:http through @hono/node-server, that reads each request's body one way (the URL path
 * names it) and answers `{"ok":true}`; nothing else, so the server's CPU per request is the read.
 *   /arrayBuffer  `request.arrayBuffer()`: what the floor route of bench:http does (unbounded)
 *   /package      `readRequestBody` of the built package (bounded in size and time)
 *   /timer        the same bounded reader with a `setTimeout` and `clearTimeout` per request,
 *                 as the package read before its Fetch reader joined the shared deadline sweep
 * Prints {"port": n} once listening; exits when its stdin closes.
 */
import { readRequestBody } from 'svc-webhooks'

const LIMIT = 1024 * 1024
const OK = '{"ok":true}'

/** The previous bounded reader: chunks counted against the limit, a timer per request for the deadline. */
async function readWithTimer(request) {
  const reader = request.body.getReader()
  const timer = setTimeout(() => reader.cancel().catch(() => undefined), 10_000)
  const chunks = []
  let total = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > LIMIT) throw new Error('too large')
      chunks.push(value)
    }
  } finally {
    clearTimeout(timer)
  }
  if (chunks.length === 1) return chunks[0]
  const out = new Uint8Array(total)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

const READS = {
  '/arrayBuffer': async (request) => new Uint8Array(await request.arrayBuffer()),
  '/package': (request) => readRequestBody(request, LIMIT),
  '/timer': readWithTimer,
}

let seen = 0
async function fetch(request) {
  const read = READS[new URL(request.url).pathname]
  if (read === undefined) return new Response('not found', { status: 404 })
  try {
    seen += (await read(request)).byteLength
  } catch {
    // A connection the load generator closed as a run ended, mid-body: not a measured request.
    return new Response('unread', { status: 400 })
  }
  return new Response(OK, { headers: { 'content-type': 'application/json', 'x-seen': String(seen) } })
}

const ready = (port) => console.log(JSON.stringify({ port }))
if (globalThis.Bun) {
  ready(globalThis.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch }).port)
} else if (globalThis.Deno) {
  globalThis.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: ({ port }) => ready(port) }, fetch)
} else {
  const { serve } = await import('@hono/node-server')
  serve({ hostname: '127.0.0.1', port: 0, fetch }, (info) => ready(info.port))
}
if (globalThis.Deno) {
  for await (const _ of globalThis.Deno.stdin.readable);
  globalThis.Deno.exit(0)
} else {
  globalThis.process.stdin.resume()
  globalThis.process.stdin.on('end', () => globalThis.process.exit(0))
}
