// The case app on the Edge runtime: POST /edge/webhooks/svc, GET /edge/runs.
// A .js route file so `next build` needs no @types/react; the handlers are TypeScript in lib/.
import { caseRoutes } from '../../../lib/case-routes'

export const runtime = 'edge'
export const dynamic = 'force-dynamic'
export const { POST, GET } = caseRoutes()
