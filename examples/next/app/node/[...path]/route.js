// The case app on the Node.js runtime: POST /node/webhooks/svc, GET /node/runs.
// A .js route file so `next build` needs no @types/react; the handlers are TypeScript in lib/.
import { caseRoutes } from '../../../lib/case-routes'

export const runtime = 'nodejs'
export const dynamic = 'force-dynamic'
export const { POST, GET } = caseRoutes()
