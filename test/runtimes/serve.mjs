/**
 * Serves test/runtimes/app.mjs on 127.0.0.1 (a free port) with the server of the runtime running
 * this file: Bun.serve, Deno.serve, or node:http through @hono/node-server. Prints one JSON line,
 * {"url": ...}, once listening; exits when its stdin closes (the parent stopped it or went away).
 * Usage: <runtime> test/runtimes/serve.mjs <file URL of the bundled test/support/case-app.ts>
 */
import { createRuntimeApp } from './app.mjs'
import { serveFetch } from '../../tools/serve-fetch.mjs'

const args = globalThis.Deno ? globalThis.Deno.args : globalThis.process.argv.slice(2)
const fetch = createRuntimeApp(await import(args[0]))
await serveFetch(fetch, (port) => console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` })))
