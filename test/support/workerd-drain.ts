/** Test-only Worker helper (bundled into the test Workers; no Node imports). */

/**
 * workerd's own HTTP server (Miniflare, `wrangler dev`; not Cloudflare's edge) resets a keep-alive
 * connection whose request body was left unread, without `Connection: close`: the case table's
 * next request on that socket would fail with ECONNRESET. The answer is already decided; reading
 * the rest only keeps the test client's connection usable.
 *
 * @example
 * if (pathname === CASE_PATH) return drainRefused(request, await worker.fetch(request, env))
 */
export async function drainRefused(request: Request, response: Response): Promise<Response> {
  if (response.status === 413 && request.body !== null && !request.bodyUsed) {
    await request.body.pipeTo(new WritableStream()).catch(() => undefined)
  }
  return response
}
