// The console in an Express app:
//   SVC_WEBHOOK_SECRET=svc_whsec_... CONSOLE_PASSWORD=... node examples/console/server.mjs
// then open http://127.0.0.1:3000/admin/webhooks/ (user "ops", the password above).
import { timingSafeEqual } from 'node:crypto'
import express from 'express'
import { createInboxWorker, MemoryInbox } from 'svc-webhooks'
import { MemoryHistory } from 'svc-webhooks/history'
import { webhooks } from 'svc-webhooks/express'
import { createConsole, toNodeHandler } from 'svc-webhooks/console'

const secret = process.env.SVC_WEBHOOK_SECRET
const password = process.env.CONSOLE_PASSWORD
if (!secret || !password) {
  console.error('Set SVC_WEBHOOK_SECRET (the endpoint\'s signing secret) and CONSOLE_PASSWORD, e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test CONSOLE_PASSWORD=change-me node examples/console/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const history = new MemoryHistory({ keepBodies: true })
const inbox = new MemoryInbox()
const on = {
  'message.received': async (event, delivery) => {
    console.log(`processed ${event.event} ${delivery.id}`)
  },
}
const receiver = webhooks({ secret, history, on })
const worker = createInboxWorker({ inbox, history, on })
worker.start()

// HTTP Basic: the browser asks for the password on a 401 with WWW-Authenticate.
const expected = Buffer.from(`Basic ${Buffer.from(`ops:${password}`).toString('base64')}`)
function authorize(request) {
  const given = Buffer.from(request.headers.get('authorization') ?? '')
  if (given.length === expected.length && timingSafeEqual(given, expected)) return true
  return new Response(null, { status: 401, headers: { 'www-authenticate': 'Basic realm="webhooks console"' } })
}

const app = express()
app.post('/webhooks/svc', receiver)
app.post('/webhooks/svc-inbox', webhooks({ secret, history, inbox, endpoint: 'inbox' }))
// Mounted before any body parser: the console reads its own forms.
app.use('/admin/webhooks', toNodeHandler(createConsole({ authorize, history, receiver, worker })))

const server = app.listen(port, '127.0.0.1', (error) => {
  if (error) {
    console.error(`Express cannot listen on 127.0.0.1:${port}: ${error.message}`)
    process.exit(1)
  }
  console.log(`Receiving on http://127.0.0.1:${server.address().port}/webhooks/svc; console on http://127.0.0.1:${server.address().port}/admin/webhooks/`)
})
process.on('SIGTERM', () => worker.stop().then(() => server.close(() => process.exit(0))))
