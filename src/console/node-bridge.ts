/**
 * `toNodeHandler`: runs the console's Fetch handler from a `node:http` request, for Express,
 * Fastify (`reply.raw` after `reply.hijack()`), Koa and plain `node:http`. Reads at most 16 KiB
 * of body (an action's form), builds the URL from `originalUrl` (Express keeps the mount path
 * there) and the Host header, and writes the answer. Uses no `node:` module.
 */

/** `IncomingHttpHeaders`, without importing node's types. */
type NodeJSHeaders = { [name: string]: string | string[] | undefined }

interface NodeRequest {
  method?: string
  url?: string
  originalUrl?: string
  headers: Record<string, string | string[] | undefined> | NodeJSHeaders
  socket?: { encrypted?: boolean }
  // Loose on purpose: Express, Fastify and Koa each type `on` with their own overloads.
  on(event: string, listener: (...args: any[]) => void): unknown
}

interface NodeResponse {
  statusCode: number
  setHeader(name: string, value: string | number | readonly string[]): unknown
  end(body?: any): unknown
}

const MAX_BODY = 16 * 1024

function readBody(req: NodeRequest): Promise<Uint8Array | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = []
    let size = 0
    req.on('data', (chunk: Uint8Array) => {
      size += chunk.length
      if (size <= MAX_BODY) chunks.push(chunk)
    })
    req.on('end', () => {
      if (size > MAX_BODY) return resolve(undefined)
      const body = new Uint8Array(size)
      let at = 0
      for (const c of chunks) {
        body.set(c, at)
        at += c.length
      }
      resolve(body)
    })
    req.on('error', reject)
  })
}

/**
 * A `(req, res)` handler around a Fetch handler.
 *
 * @example
 * app.use('/admin/webhooks', toNodeHandler(createConsole({ authorize, history })))
 */
// The parameters are `any`: Express, Fastify, Koa and node:http each type their request their own way.
export function toNodeHandler(handler: (request: Request) => Promise<Response>): (req: any, res: any) => Promise<void> {
  return async (incoming: unknown, outgoing: unknown) => {
    const req = incoming as NodeRequest
    const res = outgoing as NodeResponse
    const host = String(req.headers.host ?? '127.0.0.1')
    const proto = req.socket?.encrypted ? 'https' : 'http'
    const url = `${proto}://${host}${req.originalUrl ?? req.url ?? '/'}`
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v)
    }
    const method = (req.method ?? 'GET').toUpperCase()
    let body: Uint8Array | undefined
    if (method === 'POST') {
      body = await readBody(req).catch(() => undefined)
      if (body === undefined) {
        res.statusCode = 413
        res.end()
        return
      }
    }
    const response = await handler(new Request(url, { method, headers, ...(body && { body: body as BufferSource }) }))
    res.statusCode = response.status
    response.headers.forEach((value, name) => res.setHeader(name, value))
    res.end(new Uint8Array(await response.arrayBuffer()))
  }
}
