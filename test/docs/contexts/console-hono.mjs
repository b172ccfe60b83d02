// context: a Hono `app` with the receiver on /webhooks/svc and `ops` (the console of
// docs/console.md); it is served on $PORT after.
// runs as: server
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { MemoryHistory } from 'svc-webhooks/history'
import { webhooks } from 'svc-webhooks/hono'
import { createConsole } from 'svc-webhooks/console'

const history = new MemoryHistory()
const receiver = webhooks({ secret: process.env.SVC_WEBHOOK_SECRET, history, on: { 'message.received': async (event) => console.log('message', event.message.id) } })
const ops = createConsole({ authorize: () => false, history })
const app = new Hono()
app.post('/webhooks/svc', receiver, (c) => c.body(null, 200))
/* fragment */
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' })
