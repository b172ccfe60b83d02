// One receiver process of the soaks: node:http + createNodeHandler (svc-webhooks/node) from the
// built package, in one of two modes.
// - Handler in the request (harness.mjs), with RedisStore: the handler fails at random
//   (SOAK_FAIL_RATE) by throwing, and otherwise appends the delivery id to its own record file,
//   the record the soak's exactly-once check reads.
// - Inbox (inbox-soak.mjs, SOAK_ENGINE set): `inbox` is a RedisInbox or PostgresInbox and no
//   handler runs here; each verified delivery is answered 202 once appended, 200 duplicate, or
//   503 when the inbox is unreachable. The workers (worker.mjs) run the handlers.
// Config by environment: SOAK_REDIS_URL, SOAK_CLIENT (ioredis | node-redis), SOAK_RECORD,
// SOAK_SECRET, SOAK_FAIL_RATE; or SOAK_ENGINE (redis | postgres), SOAK_INBOX_URL, SOAK_CLIENT,
// SOAK_SECRET. Prints "READY <port>" when listening; "STATS <json>" on SIGTERM.
import { closeSync, openSync, writeSync } from 'node:fs'
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisStore } from 'svc-webhooks/redis'
import { connectRedis, openInbox } from './engines.mjs'

const { SOAK_REDIS_URL, SOAK_CLIENT: kind = 'ioredis', SOAK_RECORD: recordFile, SOAK_SECRET: secret, SOAK_ENGINE: engine, SOAK_INBOX_URL } = process.env
const failRate = Number(process.env.SOAK_FAIL_RATE ?? '0.1')

const outcomes = {}
let completeFailures = 0
/** @param {{ outcome: string, error?: unknown }} result */
function count(result) {
  outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1
  if (result.outcome === 'processed' && result.error !== undefined) completeFailures++
}

let handle
let close
let record
if (engine) {
  const opened = await openInbox({ engine, url: SOAK_INBOX_URL, client: kind })
  close = opened.close
  // `log: false`: the 503s while Redis restarts are counted by `onResult`, not printed.
  handle = createNodeHandler({ secret, inbox: opened.inbox, log: false, onResult: count })
} else {
  const redis = await connectRedis(SOAK_REDIS_URL, kind)
  close = redis.close
  record = openSync(recordFile, 'a')
  handle = createNodeHandler({
    secret,
    store: new RedisStore({ client: redis.client }),
    on: {
      'message.received': async (_event, delivery) => {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5)) // some work, so resends overlap it
        if (Math.random() < failRate) {
          writeSync(record, `fail ${delivery.id}\n`)
          throw new Error('injected failure')
        }
        writeSync(record, `ok ${delivery.id}\n`)
      },
    },
    onResult: count,
  })
}

const server = createServer(handle)

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`READY ${server.address().port}\n`)
})

process.once('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  if (record !== undefined) closeSync(record)
  process.stdout.write(`STATS ${JSON.stringify({ client: kind, engine, outcomes, completeFailures })}\n`, async () => {
    await close()
    process.exit(0)
  })
})
