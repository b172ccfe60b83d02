// A receiver as you would write it: POST /webhooks/svc on the Node.js runtime. Add
// `export const runtime = 'edge'` for the Edge runtime; nothing else changes. Next imports this
// file during `next build`, so SVC_WEBHOOK_SECRET must be set then too (a missing secret fails the build).
import { withWebhooks } from 'svc-webhooks/next'

export const POST = withWebhooks({
  secret: process.env.SVC_WEBHOOK_SECRET,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`message.received ${delivery.id}: message ${event.message.id}`)
    },
  },
})
