// Invokes examples/lambda/handler.mjs locally, as Lambda does, with one signed delivery in each
// event shape (function URL, HTTP API v2, REST API v1) and then its resend:
// `SVC_WEBHOOK_SECRET=svc_whsec_test node examples/lambda/invoke.mjs`
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET, e.g. SVC_WEBHOOK_SECRET=svc_whsec_test node examples/lambda/invoke.mjs')
  process.exit(1)
}
const { handler } = await import('./handler.mjs')

const v2 = (routeKey, signed) => ({
  version: '2.0',
  routeKey,
  rawPath: '/webhooks/svc',
  rawQueryString: '',
  headers: signed.headers,
  requestContext: { http: { method: 'POST', path: '/webhooks/svc', protocol: 'HTTP/1.1', sourceIp: '192.0.2.10', userAgent: 'svc' } },
  body: signed.body,
  isBase64Encoded: false,
})
const v1 = (signed) => ({
  resource: '/webhooks/svc',
  path: '/webhooks/svc',
  httpMethod: 'POST',
  headers: signed.headers,
  multiValueHeaders: Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k, [v]])),
  requestContext: { httpMethod: 'POST', path: '/prod/webhooks/svc', stage: 'prod' },
  body: Buffer.from(signed.rawBody).toString('base64'), // as with binary media types: base64
  isBase64Encoded: true,
})

for (const [source, toEvent] of [['function URL', (s) => v2('$default', s)], ['HTTP API', (s) => v2('POST /webhooks/svc', s)], ['REST API', v1]]) {
  const first = await signWebhook({ secret, event: sampleEvent('message.received') })
  const resend = await signWebhook({ secret, event: sampleEvent('message.received'), id: first.id })
  for (const signed of [first, resend]) {
    const result = await handler(toEvent(signed), {})
    console.log(`${source}: ${result.statusCode} ${result.body}`)
  }
}
