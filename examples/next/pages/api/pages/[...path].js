// The case app on the Pages Router: POST /api/pages/webhooks/svc, GET /api/pages/runs.
// A .js route file so `next build` needs no @types/react; the handler is TypeScript in lib/.
import { casePagesRoute } from '../../../lib/case-routes'

// The signature covers the raw bytes: Next must not parse the body first.
export const config = { api: { bodyParser: false } }

export default casePagesRoute()
