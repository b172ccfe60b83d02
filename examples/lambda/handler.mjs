// AWS Lambda receiver (Node.js 20+ runtime, handler `handler.handler`), behind a function URL,
// an HTTP API (payload 2.0) or a REST API (Lambda proxy integration). Set SVC_WEBHOOK_SECRET.
import { webhooks } from 'svc-webhooks/lambda'

export const handler = webhooks({
  secret: process.env.SVC_WEBHOOK_SECRET,
  // Each Lambda instance has its own memory: with more than one, give a shared store
  // (`new RedisStore({ client })` from 'svc-webhooks/redis') so a retry on another instance is a duplicate.
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
})
