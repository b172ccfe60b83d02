/**
 * `toNodeHandler`: runs the console's Fetch handler from a `node:http` request, for Express,
 * Fastify (`reply.raw` after `reply.hijack()`), Koa and plain `node:http`. Reads at most 16 KiB
 * of body (an action's form) within `bodyTimeoutMs`, as the receiver reads a delivery
 * (`readNodeBody`: the rest of a refused body is read and dropped so the answer gets through),
 * builds the URL from `originalUrl` (Express keeps the mount path there) and the Host header, and
 * writes the answer. Uses no `node:` module.
 */
import { isWebhookVerificationError } from '../errors.js'
import { readNodeBody, type NodeBodyStream } from '../read-body.js'

/** `IncomingHttpHeaders`, without importing node's types. */
type NodeJSHeaders = { [name: string]: string | string[] | undefined }

interface NodeRequest extends NodeBodyStream {
  method?: string
  url?: string
  originalUrl?: string
  headers: Record<string, string | string[] | undefined> | NodeJSHeaders
  socket?: { encrypted?: boolean }
}

interface NodeResponse {
  statusCode: number
  setHeader(name: string, value: string | number | readonly string[]): unknown
  end(body?: any): unknown
}

const MAX_BODY = 16 * 1024

/** Options of {@link toNodeHandler}. */
export interface NodeHandlerOptions {
  /**
   * A form body still arriving after this long is abandoned and answered 503.
   * @default 10000
   */
  bodyTimeoutMs?: number
}

/**
 * A `(req, res)` handler around a Fetch handler.
 *
 * @example
 * app.use('/admin/webhooks', toNodeHandler(createConsole({ authorize, history })))
 */
// The parameters are `any`: Express, Fastify, Koa and node:http each type their request their own way.
export function toNodeHandler(handler: (request: Request) => Promise<Response>, { bodyTimeoutMs = 10_000 }: NodeHandlerOptions = {}): (req: any, res: any) => Promise<void> {
  if (typeof bodyTimeoutMs !== 'number' || !Number.isFinite(bodyTimeoutMs) || bodyTimeoutMs <= 0) {
    throw new TypeError('svc-webhooks: toNodeHandler `bodyTimeoutMs` must be a positive number of milliseconds.')
  }
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
      try {
        body = await readNodeBody(req, MAX_BODY, bodyTimeoutMs)
      } catch (error) {
        // Too large (413) or too slow (503); a client that went away reads no answer.
        res.statusCode = isWebhookVerificationError(error) ? error.status : 400
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
