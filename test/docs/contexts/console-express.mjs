// context: docs/console.md's server.mjs up to its console route: an Express `app` with the
// receiver on /webhooks/svc, `ops` (the console) and `toNodeHandler` imported; it listens on
// $PORT after.
// runs as: server
import express from 'express'
import { MemoryHistory } from 'svc-webhooks/history'
import { webhooks } from 'svc-webhooks/express'
import { createConsole, toNodeHandler } from 'svc-webhooks/console'

const history = new MemoryHistory()
const receiver = webhooks({ secret: process.env.SVC_WEBHOOK_SECRET, history, on: { 'message.received': async (event) => console.log('message', event.message.id) } })
const ops = createConsole({ authorize: () => false, history, receiver })
const app = express()
app.post('/webhooks/svc', receiver)
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
