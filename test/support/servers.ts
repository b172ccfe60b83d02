/**
 * Starting and stopping real HTTP servers on 127.0.0.1 (port 0) for the adapter tests: a
 * `node:http` request listener (Express, node, Hono through @hono/node-server) or a Fastify app.
 */
import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RunningServer {
  url: string
  close: () => Promise<void>
}

/** Listens on 127.0.0.1:0 and returns the base URL and a close that also drops keep-alive sockets. */
export async function listen(listener: RequestListener | Server): Promise<RunningServer> {
  const server = typeof listener === 'function' ? createServer(listener) : listener
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** A body streamed in chunks without Content-Length (chunked transfer encoding). */
export function chunkedBody(totalBytes: number, chunkBytes = 16 * 1024): ReadableStream<Uint8Array> {
  let sent = 0
  return new ReadableStream({
    pull(controller) {
      if (sent >= totalBytes) return controller.close()
      const size = Math.min(chunkBytes, totalBytes - sent)
      sent += size
      controller.enqueue(new Uint8Array(size).fill(0x61))
    },
  })
}

/** POSTs a chunked body and returns the status and JSON answer. */
export async function postChunked(url: string, totalBytes: number, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', body: chunkedBody(totalBytes), headers, duplex: 'half' } as RequestInit)
  const text = await res.text()
  return { status: res.status, text, json: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : undefined }
}
