// context: your `saveMessage`; the fragment's `handle` is then served on $PORT (as
// `Bun.serve({ fetch: handle })` would; here with @hono/node-server).
// runs as: server
import { serve } from '@hono/node-server'
import type { MessageReceivedEvent } from 'svc-webhooks'

async function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void> {
  console.log(`message ${message.id} (delivery ${deliveryId})`)
}
/* fragment */
serve({ fetch: handle, port: Number(process.env.PORT), hostname: '127.0.0.1' })
