/**
 * One receiver process for `npm run bench:history` (bench/history.mjs): node:http with
 * svc-webhooks/node, and `history` none, MemoryHistory or RedisHistory (at the URL given), or
 * `redis-unsent`: RedisHistory whose batch write resolves at once, sending nothing.
 * Prints `{"port": n}` once listening; exits when stdin closes.
 */
import { createServer } from 'node:http'
import { createNodeHandler } from 'svc-webhooks/node'
import { MemoryHistory } from 'svc-webhooks/history'

const [variant, redisUrl] = process.argv.slice(2)
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
let history
if (variant === 'memory') history = new MemoryHistory()
else if (variant === 'redis' || variant === 'redis-unsent') {
  const { default: Redis } = await import('ioredis')
  const { RedisHistory } = await import('svc-webhooks/redis')
  history = new RedisHistory({ client: new Redis(redisUrl), prefix: `{bench-${process.pid}}:` })
  // Every argument is still built (write() runs whole); only the call to Redis is skipped.
  if (variant === 'redis-unsent') history.call = async () => 1
} else if (variant !== 'none') throw new Error(`bench:history: unknown variant ${variant}`)

const handle = createNodeHandler({ secret: SECRET, on: { 'message.received': () => undefined }, log: false, ...(history && { history }) })
const server = createServer(handle).listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })))
process.stdin.resume()
process.stdin.on('end', () => process.exit(0))
