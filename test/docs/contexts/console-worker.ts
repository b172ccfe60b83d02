// context: a Cloudflare Worker module with `ops` (the console of docs/console.md), its `Env` and
// the webhook route `handleWebhook` defined; type-checked, as Workers code runs in workerd.
// runs as: typecheck
import { MemoryHistory } from 'svc-webhooks/history'
import { createConsole } from 'svc-webhooks/console'

interface Env { SVC_WEBHOOK_SECRET: string }
const ops = createConsole({ authorize: () => false, history: new MemoryHistory() })
const handleWebhook = async (_request: Request, _env: Env): Promise<Response> => new Response(null, { status: 204 })
/* fragment */
