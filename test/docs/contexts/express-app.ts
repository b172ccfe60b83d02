// context: an Express app (`app`) and your `saveMessage`, in an ES module, with nothing of
// svc-webhooks imported yet (the fragment imports what it uses); it listens on $PORT after.
// runs as: server
import express from 'express'
import type { MessageReceivedEvent } from 'svc-webhooks'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}

const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
