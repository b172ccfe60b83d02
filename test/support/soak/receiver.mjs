// One receiver process of the soak: node:http + createNodeHandler (svc-webhooks/node) + RedisStore from the
// built package. Its handler fails at random (SOAK_FAIL_RATE) by throwing, and otherwise appends
// the delivery id to its own record file: the record the soak's exactly-once check reads.
// Config by environment: SOAK_REDIS_URL, SOAK_CLIENT (ioredis | node-redis), SOAK_RECORD,
// SOAK_SECRET, SOAK_FAIL_RATE. Prints "READY <port>" when listening; "STATS <json>" on SIGTERM.
import { closeSync, openSync, writeSync } from 'node:fs'
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisStore } from 'svc-webhooks/redis'

const { SOAK_REDIS_URL: url, SOAK_CLIENT: kind = 'ioredis', SOAK_RECORD: recordFile, SOAK_SECRET: secret } = process.env
const failRate = Number(process.env.SOAK_FAIL_RATE ?? '0.1')

async function connect() {
  if (kind === 'node-redis') {
    const { createClient } = await import('redis')
    const client = createClient({ url })
    client.on('error', () => {}) // reconnects during the restart are expected
    await client.connect()
    return { client, close: () => client.destroy() }
  }
  const { Redis } = await import('ioredis')
  const client = new Redis(url)
  client.on('error', () => {})
  return { client, close: () => client.disconnect() }
}

const { client, close } = await connect()
const record = openSync(recordFile, 'a')
const outcomes = {}
let completeFailures = 0

const handle = createNodeHandler({
  secret,
  store: new RedisStore({ client }),
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
  onResult(result) {
    outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1
    if (result.outcome === 'processed' && result.error !== undefined) completeFailures++
  },
})

const server = createServer(handle)

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`READY ${server.address().port}\n`)
})

process.once('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  closeSync(record)
  process.stdout.write(`STATS ${JSON.stringify({ client: kind, outcomes, completeFailures })}\n`, () => {
    close()
    process.exit(0)
  })
})
