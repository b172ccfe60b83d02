/**
 * Serves test/runtimes/app.mjs on 127.0.0.1 (a free port) with the server of the runtime running
 * this file: Bun.serve, Deno.serve, or node:http through @hono/node-server. Prints one JSON line,
 * {"url": ...}, once listening; exits when its stdin closes (the parent stopped it or went away).
 * Usage: <runtime> test/runtimes/serve.mjs <file URL of the bundled test/support/case-app.ts>
 */
import { createRuntimeApp } from './app.mjs'

const args = globalThis.Deno ? globalThis.Deno.args : globalThis.process.argv.slice(2)
const fetch = createRuntimeApp(await import(args[0]))
const ready = (port) => console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }))

if (globalThis.Bun) {
  const server = globalThis.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch })
  ready(server.port)
} else if (globalThis.Deno) {
  globalThis.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: ({ port }) => ready(port) }, fetch)
} else {
  const { serve } = await import('@hono/node-server')
  serve({ hostname: '127.0.0.1', port: 0, fetch }, (info) => ready(info.port))
}

// The parent holds our stdin open: when it ends (the parent stopped us or died), exit.
if (globalThis.Deno) {
  for await (const _ of globalThis.Deno.stdin.readable);
  globalThis.Deno.exit(0)
} else {
  globalThis.process.stdin.resume()
  globalThis.process.stdin.on('end', () => globalThis.process.exit(0))
}
