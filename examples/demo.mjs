// svc-webhooks demo: a receiver (svc-webhooks/node) on 127.0.0.1 with the in-memory store, fed real signed deliveries
// over HTTP, and the answer each one got. Run it with `npm run demo`.
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const secret = 'svc_whsec_demo0000000000000000000000'
let runs = 0
// What the handler and the receiver's log say, printed under the table (each delivery's in the
// order it was answered), so the table comes first.
const handled = []
const logged = []

const handle = createNodeHandler({
  secret,
  on: {
    'message.received': async (event, delivery) => {
      runs++
      handled.push(`${event.event} ${delivery.id} from ${event.message.from}: "${event.message.text}"`)
    },
  },
  log: (line) => logged.push(line),
})

const server = createServer(handle)
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const url = `http://127.0.0.1:${server.address().port}/webhooks/svc`
console.log(`svc-webhooks demo: a receiver on ${url}, fed signed deliveries over HTTP\n`)

const event = sampleEvent('message.received')
const now = Math.floor(Date.now() / 1000)
const first = await signWebhook({ secret, event })

const cases = [
  ['accepted', first],
  ['duplicate (same id, new timestamp)', await signWebhook({ secret, event, id: first.id, timestamp: now + 1 })],
  ['tampered body', { ...first, body: first.body.replace('dos', 'diez') }],
  ['stale timestamp (10 min old)', await signWebhook({ secret, event, timestamp: now - 600 })],
  ['v1 signature only', await signWebhook({ secret, event, schemes: ['v1'] })],
  ['wrong secret', await signWebhook({ secret: 'svc_whsec_someone_else', event })],
  ['not JSON', await signWebhook({ secret, body: 'hello, not json' })],
]

const rows = []
for (const [name, delivery] of cases) {
  const before = runs
  const lines = logged.length
  const res = await fetch(url, { method: 'POST', headers: delivery.headers, body: delivery.body })
  // A delivery's own line first, then what it adds up to (a run of failing answers).
  const mine = logged.splice(lines)
  logged.push(...mine.filter((line) => line.includes('(delivery ')), ...mine.filter((line) => !line.includes('(delivery ')))
  const answer = await res.json()
  const code = answer.code ?? (answer.duplicate ? 'duplicate' : answer.ignored ? 'ignored' : 'processed')
  rows.push([name, String(res.status), code, runs > before ? 'yes' : 'no'])
}

const table = [['case', 'status', 'answer', 'handler ran?'], ...rows]
const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
for (const [i, row] of table.entries()) {
  console.log(row.map((cell, j) => cell.padEnd(widths[j])).join('  ').trimEnd())
  if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '))
}
console.log('\nThe sender retries 5xx and 429; 2xx is delivered; any other 4xx is a permanent refusal.')
console.log(`\nThe handler ran ${handled.length === 1 ? 'once' : `${handled.length} times`}:\n${handled.map((line) => `  ${line}`).join('\n')}`)
console.log(`\nThe receiver's log (the first refusal of each code; repeats within 10 s are counted into one summary line; never the body or the secret):\n${logged.map((line) => `  ${line}`).join('\n')}`)

server.closeAllConnections()
server.close()
