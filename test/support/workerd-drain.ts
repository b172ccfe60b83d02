/** Test-only Worker helper (bundled into the test Workers; no Node imports). */

/**
 * workerd's own HTTP server (Miniflare, `wrangler dev`; not Cloudflare's edge) resets a keep-alive
 * connection whose request body was left unread, without `Connection: close`: the case table's
 * next request on that socket would fail with ECONNRESET. A refusal decided before the body is
 * read leaves it unread: 413 from the declared length, and on the multi-tenant route 404
 * unknown_endpoint and 503 secret_lookup_failed (the secret is looked up before the body is read).
 * The answer is already decided; reading the rest only keeps the test client's connection usable.
 *
 * @example
 * if (pathname === CASE_PATH) return drainRefused(request, await worker.fetch(request, env))
 */
export async function drainRefused(request: Request, response: Response): Promise<Response> {
  if (response.status >= 400 && request.body !== null && !request.bodyUsed) {
    await request.body.pipeTo(new WritableStream()).catch(() => undefined)
  }
  return response
}
