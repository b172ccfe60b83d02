/**
 * The case app (test/support/case-app.ts) as Next.js route handlers, one case app per route file.
 * GET answers the runs record on `<base>/runs` and hands anything else to the webhook handler,
 * which answers 405 with `Allow: POST` like every adapter (Next's own 405 has no Allow header).
 * The runs record lives in the same route file as the handler: each Edge route runs in its own
 * isolate, so a separate runs route would never see the handler's record.
 */
import type { ServerResponse } from 'node:http'
import { withWebhooks, withWebhooksPages, type PagesApiRequest } from 'svc-webhooks/next'
import { createCaseApp, RUNS_PATH } from '../../../test/support/case-app'

const JSON_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store' }

const isRuns = (path: string) => path.split('?')[0]!.endsWith(RUNS_PATH)

/** App Router: `export const { POST, GET } = caseRoutes()` in `app/<base>/[...path]/route.js`. */
export function caseRoutes() {
  const app = createCaseApp()
  const POST = withWebhooks(app.options)
  async function GET(request: Request): Promise<Response> {
    if (!isRuns(new URL(request.url).pathname)) return POST(request)
    return new Response(app.runsJson(), { headers: JSON_HEADERS })
  }
  return { POST, GET }
}

/** Pages Router: `export default casePagesRoute()` in `pages/api/<base>/[...path].js`. */
export function casePagesRoute() {
  const app = createCaseApp()
  const handle = withWebhooksPages(app.options)
  return async (req: PagesApiRequest, res: ServerResponse): Promise<void> => {
    if (req.method === 'GET' && isRuns(req.url ?? '')) return void res.writeHead(200, JSON_HEADERS).end(app.runsJson())
    return handle(req, res)
  }
}
