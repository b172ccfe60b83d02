/** Details of verification that the vectors do not reach: the signed timestamp text, event narrowing. */
import { describe, expect, expectTypeOf, it } from 'vitest'
import { isEventType, verifyWebhook, type MessageReceivedEvent, type WebhookEvent } from 'svc-webhooks'
import { computeSignature, sampleEvent, serializeEvent } from 'svc-webhooks/testing'

const secret = 'svc_whsec_dGVzdC1kZXRhaWxz'

describe('verifyWebhook details', () => {
  it('signs the timestamp header text as received, not its number', async () => {
    const body = new TextEncoder().encode(serializeEvent(sampleEvent('message.received')))
    const id = '0f8e1c2a-4b5d-4e6f-8a9b-0c1d2e3f4a5b'
    const text = '0999999999' // zero-padded: Number() would drop the leading zero
    const headers = {
      'svc-webhook-id': id,
      'svc-webhook-timestamp': text,
      'svc-webhook-signature-v2': `v2=${await computeSignature(secret, `${id}.${text}.`, body)}`,
    }
    const delivery = await verifyWebhook({ body, headers }, { secret, now: () => 999_999_999_000 })
    expect(delivery.timestamp).toBe(999_999_999)
  })

  it('isEventType narrows a verified event to its payload type', () => {
    const event: WebhookEvent = sampleEvent('message.received')
    expect(isEventType(event, 'message.received')).toBe(true)
    expect(isEventType({ event: 'template.approved' }, 'message.received')).toBe(false)
    if (isEventType(event, 'message.received')) expectTypeOf(event).toEqualTypeOf<MessageReceivedEvent>()
  })
})
