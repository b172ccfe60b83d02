import { expect, it } from 'vitest'
import { verifyWebhook } from 'svc-webhooks'
import { signWebhook, sampleEvent } from 'svc-webhooks/testing'
it('smoke', async () => {
  const s = await signWebhook({ secret: 'svc_whsec_a', event: sampleEvent('message.received') })
  const d = await verifyWebhook({ body: s.rawBody, headers: s.headers }, { secret: 'svc_whsec_a' })
  expect(d.signatureVersion).toBe('v2')
})
