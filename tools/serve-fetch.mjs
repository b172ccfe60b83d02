// @ts-check
/**
 * Serves a Fetch handler on 127.0.0.1 (a free port) with the server of the runtime running this
 * file: Bun.serve, Deno.serve, or node:http through @hono/node-server. Calls `ready(port)` once
 * listening, and exits the process when its stdin closes (the parent stopped it or went away).
 * Shared by the runtime test servers and the per-runtime benchmarks.
 *
 * @example
 * await serveFetch(fetch, (port) => console.log(JSON.stringify({ port })))
 *
 * @param {(request: Request) => Response | Promise<Response>} fetch
 * @param {(port: number) => void} ready
 */
export async function serveFetch(fetch, ready) {
  /** @type {any} */
  const runtime = globalThis
  if (runtime.Bun) {
    ready(runtime.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch }).port)
  } else if (runtime.Deno) {
    runtime.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: (/** @type {{ port: number }} */ { port }) => ready(port) }, fetch)
  } else {
    const { serve } = await import('@hono/node-server')
    serve({ hostname: '127.0.0.1', port: 0, fetch }, (info) => ready(info.port))
  }
  // The parent holds our stdin open: when it ends, exit.
  if (runtime.Deno) {
    for await (const _ of runtime.Deno.stdin.readable);
    runtime.Deno.exit(0)
  } else {
    runtime.process.stdin.resume()
    runtime.process.stdin.on('end', () => runtime.process.exit(0))
  }
}
