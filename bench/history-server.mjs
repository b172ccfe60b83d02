/**
 * One receiver process for `npm run bench:history` (bench/history.mjs): node:http with
 * svc-webhooks/node, and `history` none, MemoryHistory or RedisHistory (at the URL given), or
 * `redis-unsent`: RedisHistory whose batch write resolves at once, sending nothing; `redis-noop`:
 * RedisHistory whose batch write sends every argument to a script that does nothing;
 * `redis-blob`: RedisHistory whose batch write is one XADD of the batch as one JSON string (the
 * least any layout on Redis could send: nothing there can be listed or found by id); `inbox`,
 * `inbox-memory`, `inbox-redis`: the same receiver appending to a RedisInbox; `store`,
 * `store-memory`, `store-redis`: the same receiver deduplicating in a RedisStore.
 * Prints `{"port": n}` once listening; exits when stdin closes.
 */
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'
import { MemoryHistory } from 'svc-webhooks/history'

const [variant, redisUrl] = process.argv.slice(2)
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
// `inbox-...`: the receiver appends each delivery to a RedisInbox (answers 202), as in production;
// `store-...`: it runs the handler itself, deduplicating in a RedisStore shared by its processes.
const grouped = /^(inbox|store)(?:-(.+))?$/.exec(variant)
const [kind, engine] = grouped ? [grouped[1], grouped[2] ?? 'none'] : ['direct', variant]
const redis = async () => new (await import('ioredis')).default(redisUrl)
let history
if (engine === 'memory') history = new MemoryHistory()
else if (engine === 'redis-blob') {
  const { RedisHistory } = await import('svc-webhooks/redis')
  const client = await redis()
  history = new RedisHistory({ client, prefix: `{bench-${process.pid}}:` })
  history.write = async (records) => {
    await client.xadd(`{bench-${process.pid}}:log`, 'MAXLEN', '~', '2000', '*', 'b', JSON.stringify(records))
  }
} else if (engine === 'redis' || engine === 'redis-unsent' || engine === 'redis-noop') {
  const { RedisHistory } = await import('svc-webhooks/redis')
  history = new RedisHistory({ client: await redis(), prefix: `{bench-${process.pid}}:` })
  // Every argument is still built (write() runs whole); only the call to Redis is skipped.
  if (engine === 'redis-unsent') history.call = async () => 1
  // Every batch is encoded, sent and taken in by the server; the script stores nothing.
  if (engine === 'redis-noop') {
    const call = history.call.bind(history)
    history.call = (name, script, args) => call(name, name === 'write' ? 'return 1' : script, args)
  }
} else if (engine !== 'none') throw new Error(`bench:history: unknown variant ${variant}`)
let inbox
if (kind === 'inbox') {
  const { RedisInbox } = await import('svc-webhooks/redis')
  inbox = new RedisInbox({ client: await redis(), prefix: `{bench-inbox-${process.pid}}:` })
}

let store
if (kind === 'store') {
  const { RedisStore } = await import('svc-webhooks/redis')
  store = new RedisStore({ client: await redis(), prefix: `{bench-store-${process.pid}}:` })
}

const handle = createNodeHandler({ secret: SECRET, on: { 'message.received': () => undefined }, log: false, ...(history && { history }), ...(inbox && { inbox }), ...(store && { store }) })
const server = createServer(handle).listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })))
process.stdin.resume()
process.stdin.on('end', () => process.exit(0))
