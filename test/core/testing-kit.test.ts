/**
 * `svc-webhooks/testing` as users install it: createSignedRequest feeds Fetch handlers (the
 * Web-standard entry and a Hono app), signWebhook's headers feed node:http, fixedClock drives
 * both the signer and the receiver, and each sample event verifies.
 */
import { Hono } from 'hono'
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, verifyWebhook } from 'svc-webhooks'
import { createFetchHandler } from 'svc-webhooks/fetch'
import { createSignedRequest, fixedClock, sampleEvent, sampleEvents, signWebhook } from 'svc-webhooks/testing'

const secret = 'svc_whsec_dGVzdGluZy1raXQtc2VjcmV0'

describe('svc-webhooks/testing', () => {
  it('createSignedRequest: a Fetch Request a Fetch handler accepts, to the default URL', async () => {
    const seen: string[] = []
    const handle = createFetchHandler({ secret, on: { 'message.received': (event) => void seen.push(event.message.text) } })
    const request = await createSignedRequest({ secret, event: sampleEvent('message.received', { conversation_id: 'c-1' }) })
    expect(request.url).toBe('http://127.0.0.1/webhooks/svc')
    expect(request.method).toBe('POST')
    const response = await handle(request)
    expect(response.status).toBe(200)
    expect(seen).toEqual([sampleEvents['message.received'].message.text])
  })

  it('createSignedRequest works with Hono app.request, and extra headers can damage it on purpose', async () => {
    const handle = createFetchHandler({ secret, on: { 'message.received': () => undefined } })
    const app = new Hono().post('/hooks', (c) => handle(c.req.raw))
    const ok = await app.request(await createSignedRequest({ secret, event: sampleEvent('message.received'), url: 'http://localhost/hooks' }))
    expect(ok.status).toBe(200)
    const damaged = await createSignedRequest({ secret, event: sampleEvent('message.received'), url: 'http://localhost/hooks', headers: { 'svc-webhook-signature-v2': '' } })
    const refused = await app.request(damaged)
    expect(refused.status).toBe(401)
    expect(await refused.json()).toMatchObject({ code: 'v1_not_allowed' })
  })

  it('createSignedRequest keeps the body bytes exactly', async () => {
    const body = '{"event":"message.received","z":1,"a":"caf\\u00e9"}'
    const request = await createSignedRequest({ secret, body })
    const bytes = new Uint8Array(await request.arrayBuffer())
    expect(new TextDecoder().decode(bytes)).toBe(body)
    await expect(verifyWebhook({ body: bytes, headers: request.headers }, { secret })).resolves.toMatchObject({ signatureVersion: 'v2' })
  })

  it('fixedClock drives signer and receiver; advancing past the tolerance refuses the same delivery', async () => {
    const clock = fixedClock(1_767_225_600)
    expect(clock()).toBe(1_767_225_600_000)
    expect(clock.seconds).toBe(1_767_225_600)
    const receiver = createWebhookReceiver({ secret, now: clock, on: { 'message.received': () => undefined } })
    const signed = await signWebhook({ secret, event: sampleEvent('message.received'), now: clock })
    expect(signed.timestamp).toBe(1_767_225_600)
    clock.advance(300)
    expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(200)
    clock.advance(1)
    const stale = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    expect(stale.status).toBe(401)
    expect(JSON.parse(stale.body)).toMatchObject({ code: 'timestamp_too_old' })
    clock.set(1_767_225_600 - 301)
    expect(JSON.parse((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).body)).toMatchObject({ code: 'timestamp_in_future' })
    expect(() => fixedClock(Number.NaN)).toThrow(TypeError)
  })

  it('every sample event signs and verifies as its own type', async () => {
    const types = Object.keys(sampleEvents) as (keyof typeof sampleEvents)[]
    expect(types.length).toBeGreaterThan(0)
    for (const type of types) {
      const signed = await signWebhook({ secret, event: sampleEvent(type) })
      expect(signed.headers['svc-webhook-event']).toBe(type)
      const delivery = await verifyWebhook({ body: signed.rawBody, headers: signed.headers }, { secret })
      expect(delivery.event).toEqual(sampleEvents[type])
    }
  })
})
