// context: a route module (a Next.js route.ts); after the fragment, its `POST` is given one
// signed delivery and must answer 2xx.
// runs as: script
import * as testing from 'svc-webhooks/testing'
/* fragment */
const answer = await POST(await testing.createSignedRequest({ secret: process.env.SVC_WEBHOOK_SECRET!, event: testing.sampleEvent('message.received') }))
process.exit(answer.ok ? 0 : 1)
