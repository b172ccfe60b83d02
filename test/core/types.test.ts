/**
 * Type-level tests of the public API (`expectTypeOf`, compiled by `npm run typecheck`), run
 * through a real receiver so each typed value is also checked at run time. Module augmentation
 * of WebhookEventMap is checked against the built .d.ts in package.test.ts: augmenting here
 * would change the map for the whole typecheck program.
 */
import { describe, expect, expectTypeOf, it } from 'vitest'
import {
  createWebhookReceiver,
  isWebhookVerificationError,
  MemoryStore,
  verifySignature,
  verifyWebhook,
  WebhookVerificationError,
  type ClaimResult,
  type IdempotencyStore,
  type MessageReceivedEvent,
  type UnknownWebhookEvent,
  type VerifiedDelivery,
  type VerifiedSignature,
  type WebhookErrorCode,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookResponse,
  type WebhookResult,
  type SecretLookup,
  type SecretSource,
} from 'svc-webhooks'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_TypesTestSecret'

describe('handlers', () => {
  it('get the typed event first and the typed delivery second', async () => {
    let ran = false
    const receiver = createWebhookReceiver({
      secret: SECRET,
      on: {
        'message.received': (event, delivery) => {
          expectTypeOf(event).toEqualTypeOf<MessageReceivedEvent>()
          expectTypeOf(event.message.created_at).toBeString()
          expectTypeOf(delivery).toEqualTypeOf<VerifiedDelivery<MessageReceivedEvent>>()
          expectTypeOf(delivery.id).toBeString()
          expectTypeOf(delivery.timestamp).toBeNumber()
          expectTypeOf(delivery.signatureVersion).toEqualTypeOf<'v2' | 'v1'>()
          expectTypeOf(delivery.secretIndex).toBeNumber()
          expectTypeOf(delivery.rawBody).toEqualTypeOf<Uint8Array>()
          expect(event.message.created_at).toBe('2026-11-22T10:15:30.123456+00:00')
          expect(delivery.event).toBe(event)
          ran = true
        },
      },
    })
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
    const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    expectTypeOf(answer).toEqualTypeOf<WebhookResponse>()
    expect(answer.status).toBe(200)
    expect(ran).toBe(true)
  })

  it('`on` refuses an event type that does not exist, and a handler with the wrong event type', () => {
    const create = () =>
      createWebhookReceiver({
        secret: SECRET,
        on: {
          // @ts-expect-error a misspelled event type is a compile error, not a handler that never runs
          'message.recieved': () => {},
        },
      })
    expect(create).not.toThrow()
    createWebhookReceiver({
      secret: SECRET,
      on: {
        // @ts-expect-error the handler's event is a MessageReceivedEvent, not a string
        'message.received': (event: string) => event,
      },
    })
  })

  it('handlers may be sync or async and return anything', () => {
    expect(() =>
      createWebhookReceiver({ secret: SECRET, on: { 'message.received': async () => 42 } }),
    ).not.toThrow()
  })
})

describe('verification', () => {
  it('verifyWebhook resolves a VerifiedDelivery of any event, narrowed by its `event` field', async () => {
    const signed: SignedWebhook = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
    const delivery = await verifyWebhook({ body: signed.rawBody, headers: signed.headers }, { secret: SECRET })
    expectTypeOf(delivery).toEqualTypeOf<VerifiedDelivery<WebhookEvent>>()
    expectTypeOf<WebhookEvent>().toEqualTypeOf<MessageReceivedEvent | UnknownWebhookEvent>()
    if (delivery.event.event === 'message.received') {
      const event = delivery.event as MessageReceivedEvent
      expect(event.message.text).toContain('mesa')
    }
    const verified = await verifySignature({ body: signed.body, headers: new Headers(signed.headers) }, { secret: [SECRET] })
    expectTypeOf(verified).toEqualTypeOf<VerifiedSignature>()
    expectTypeOf(verified).not.toHaveProperty('event')
    expect(verified.id).toBe(signed.id)
  })

  it('takes the documented input and option types', async () => {
    expectTypeOf(verifyWebhook).parameter(0).toHaveProperty('body').toEqualTypeOf<Uint8Array | ArrayBuffer | string>()
    expectTypeOf(verifyWebhook).parameter(1).toHaveProperty('secret').toEqualTypeOf<string | readonly string[] | SecretSource | SecretLookup<any>>()
    expectTypeOf(verifyWebhook).parameter(1).toHaveProperty('toleranceSeconds').toEqualTypeOf<number | undefined>()
    // @ts-expect-error a parsed object is not a body (the runtime says so too: body_already_parsed)
    await expect(verifyWebhook({ body: { event: 'message.received' }, headers: {} }, { secret: SECRET })).rejects.toMatchObject({ code: 'body_already_parsed' })
  })
})

describe('errors, results and stores', () => {
  it('WebhookVerificationError has a literal-union code and a status; the guard narrows', () => {
    const error: unknown = new WebhookVerificationError('missing_id', 'missing')
    expectTypeOf<WebhookErrorCode>().toEqualTypeOf<
      | 'body_already_parsed' | 'body_too_large' | 'missing_id' | 'invalid_id' | 'missing_timestamp' | 'invalid_timestamp'
      | 'timestamp_too_old' | 'timestamp_in_future' | 'missing_signature' | 'v1_not_allowed' | 'invalid_signature' | 'invalid_json'
      | 'body_timeout' | 'unknown_endpoint' | 'secret_lookup_failed' | 'secret_pending'
    >()
    if (isWebhookVerificationError(error)) {
      expectTypeOf(error.code).toEqualTypeOf<WebhookErrorCode>()
      expectTypeOf(error.status).toBeNumber()
      expect(error.code).toBe('missing_id')
    } else {
      expect.unreachable()
    }
    // @ts-expect-error not a code
    expect(() => new WebhookVerificationError('bad_code', 'x')).not.toThrow()
  })

  it('onResult gets a WebhookResult; a custom store implements IdempotencyStore', () => {
    expectTypeOf<WebhookResult['outcome']>().toEqualTypeOf<
      'processed' | 'duplicate' | 'ignored' | 'in_flight' | 'handler_failed' | 'store_unavailable' | 'refused' | 'method_not_allowed'
      | 'accepted' | 'inbox_unavailable'
    >()
    expectTypeOf<ClaimResult>().toEqualTypeOf<'claimed' | 'in_flight' | 'completed'>()
    expectTypeOf<MemoryStore>().toMatchTypeOf<IdempotencyStore>()
    expectTypeOf<WebhookEventType>().toEqualTypeOf<'message.received'>()
    const store: IdempotencyStore = {
      claim: async () => 'claimed' as const,
      complete: async () => true,
      release: async () => true,
    }
    expect(() => createWebhookReceiver({ secret: SECRET, store, on: {}, onResult: (r) => expectTypeOf(r).toEqualTypeOf<WebhookResult>() })).not.toThrow()
  })
})
