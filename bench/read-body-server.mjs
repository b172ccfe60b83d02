/**
 * The server of bench/read-body.mjs: one Fetch handler, served by Bun.serve, Deno.serve or
 * node:http through @hono/node-server, that reads each request's body one way (the URL path
 * names it) and answers `{"ok":true}`; nothing else, so the server's CPU per request is the read.
 *   /arrayBuffer  `request.arrayBuffer()`: what the floor route of bench:http does (unbounded)
 *   /package      `readRequestBody` of the built package (bounded in size and time)
 * Prints {"port": n} once listening; exits when its stdin closes.
 */
import { readRequestBody } from 'svc-webhooks'
import { serveFetch } from '../tools/serve-fetch.mjs'

const LIMIT = 1024 * 1024
const OK = '{"ok":true}'

const READS = {
  '/arrayBuffer': async (request) => new Uint8Array(await request.arrayBuffer()),
  '/package': (request) => readRequestBody(request, LIMIT),
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

await serveFetch(fetch, (port) => console.log(JSON.stringify({ port })))
