/**
 * `readRequestBody` and the Fetch entry on a `Request` built in-process (a proxy, a wrapper, edge
 * glue): its Content-Length header need not match its body, so the bytes are counted as they are
 * pulled and the read stops at the limit, whatever the header declares.
 */
import { describe, expect, it } from 'vitest'
import { readRequestBody } from 'svc-webhooks'
import { createFetchHandler } from 'svc-webhooks/fetch'
import { signWebhook, sampleEvent } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_ReadRequestBodyTestSecret'
const CHUNK = 64 * 1024
const TOTAL = 64 * 1024 * 1024

/** A Request declaring `declared` bytes whose stream would yield 64 MiB; `pulled()` counts what was read. */
function lyingRequest(declared: string, headers: Record<string, string> = {}) {
  let pulled = 0
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled >= TOTAL) return controller.close()
      pulled += CHUNK
      controller.enqueue(new Uint8Array(CHUNK).fill(0x61))
    },
  })
  const request = new Request('http://127.0.0.1/webhooks', {
    method: 'POST',
    body,
    headers: { ...headers, 'content-length': declared },
    duplex: 'half',
  } as RequestInit)
  return { request, pulled: () => pulled }
}

describe('a Request whose Content-Length lies', () => {
  it('readRequestBody stops at maxBodyBytes (body_too_large) instead of pulling 64 MiB', async () => {
    const { request, pulled } = lyingRequest('10')
    await expect(readRequestBody(request, 1024 * 1024)).rejects.toMatchObject({ code: 'body_too_large', status: 413 })
    expect(pulled()).toBeLessThanOrEqual(1024 * 1024 + 4 * CHUNK)
  })

  it('the Fetch entry answers 413 for a signed delivery and pulls no more than the limit', async () => {
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
    const handle = createFetchHandler({ secret: SECRET, on: { 'message.received': () => {} } })
    const { request, pulled } = lyingRequest('400', signed.headers)
    const response = await handle(request)
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ ok: false, code: 'body_too_large' })
    expect(pulled()).toBeLessThanOrEqual(1024 * 1024 + 4 * CHUNK)
  })
})
