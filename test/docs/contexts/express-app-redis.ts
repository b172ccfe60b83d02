// context: an Express app (`app`), your `saveMessage` and an ioredis client `redis` on
// $REDIS_URL, in an ES module, nothing of svc-webhooks imported yet; it listens on $PORT after.
// runs as: server
import express from 'express'
import * as ioredis from 'ioredis'
import type { MessageReceivedEvent } from 'svc-webhooks'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
const redis = new ioredis.Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null })

const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
