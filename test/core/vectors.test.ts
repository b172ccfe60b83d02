/**
 * Known-answer vectors (fixtures/vectors.json, computed by OpenSSL in scripts/make-vectors.sh,
 * never by this package): every vector through the built `verifyWebhook` with an injected clock,
 * and `signWebhook` plus both crypto builds (node:crypto and WebCrypto) reproduce the signatures.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { isWebhookVerificationError, verifyWebhook, type VerifiedDelivery } from 'svc-webhooks'
import { signWebhook } from 'svc-webhooks/testing'

interface Vector {
  name: string
  note: string
  secrets: string[]
  id: string
  timestamp: number
  now: number
  allowV1: boolean
  body: string | null
  bodyBase64: string
  headers: Record<string, string>
  signed: { secret: string; id: string; timestamp: number; bodyBase64: string }
  expected: { v2: string; v1: string }
  openssl: { v2: string; v1: string }
  outcome: { ok: true; signatureVersion: 'v2' | 'v1'; secretIndex: number } | { ok: false; code: string }
}

const fixture = JSON.parse(readFileSync(new URL('../../fixtures/vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] }
const vectors = fixture.vectors

const bytes = (base64: string) => new Uint8Array(Buffer.from(base64, 'base64'))

async function outcomeOf(vector: Vector, body: Uint8Array | string, headers: Headers | Record<string, string>) {
  const options = { secret: vector.secrets, allowV1: vector.allowV1, now: () => vector.now * 1000 }
  try {
    const delivery: VerifiedDelivery = await verifyWebhook({ body, headers }, options)
    return { ok: true, signatureVersion: delivery.signatureVersion, secretIndex: delivery.secretIndex, delivery }
  } catch (error) {
    if (!isWebhookVerificationError(error)) throw error
    return { ok: false, code: error.code }
  }
}

it('the fixture covers every required case', () => {
  const names = vectors.map((v) => v.name)
  for (const required of [
    'v2-compact-message-received', 'v2-raw-utf8', 'v2-unicode-escapes', 'v2-pretty-printed', 'v2-trailing-newline',
    'v1-only-allowed', 'v2-rotated-secrets', 'v2-several-values-space', 'v2-several-values-comma',
    'wrong-secret', 'flipped-body-byte',
  ]) {
    expect(names).toContain(required)
  }
  expect(vectors.filter((v) => v.outcome.ok).length).toBeGreaterThanOrEqual(8)
  expect(vectors.filter((v) => !v.outcome.ok).length).toBeGreaterThanOrEqual(8)
})

describe.each(vectors)('vector $name', (vector) => {
  const body = bytes(vector.bodyBase64)

  it('the text form, when present, is exactly the signed bytes', () => {
    if (vector.body === null) {
      expect(() => new TextDecoder('utf-8', { fatal: true }).decode(body)).toThrow()
    } else {
      expect(new TextEncoder().encode(vector.body)).toEqual(body)
    }
  })

  it(`verifyWebhook gives ${vector.outcome.ok ? 'a delivery' : vector.outcome.code}`, async () => {
    const result = await outcomeOf(vector, body, vector.headers)
    const { delivery, ...outcome } = result
    expect(outcome).toEqual(vector.outcome)
    if (delivery) {
      expect(delivery.id).toBe(vector.id)
      expect(delivery.timestamp).toBe(vector.timestamp)
      expect(delivery.rawBody).toEqual(body)
      expect(delivery.event).toEqual(JSON.parse(vector.body!))
    }
  })

  it('gives the same outcome with a string body and Fetch Headers', async () => {
    if (vector.body === null) {
      // Not UTF-8: the text form cannot carry these bytes, and a string body would sign U+FFFD instead.
      const { delivery: _, ...outcome } = await outcomeOf(vector, body, new Headers(vector.headers))
      expect(outcome).toEqual(vector.outcome)
      return
    }
    const { delivery: _, ...outcome } = await outcomeOf(vector, vector.body, new Headers(vector.headers))
    expect(outcome).toEqual(vector.outcome)
  })

  it('signWebhook reproduces the OpenSSL signatures', async () => {
    const signed = await signWebhook({
      secret: vector.signed.secret,
      body: bytes(vector.signed.bodyBase64),
      id: vector.signed.id,
      timestamp: vector.signed.timestamp,
    })
    expect(signed.headers['svc-webhook-signature-v2']).toBe(`v2=${vector.expected.v2}`)
    expect(signed.headers['svc-webhook-signature']).toBe(`v1=${vector.expected.v1}`)
    expect(signed.rawBody).toEqual(bytes(vector.signed.bodyBase64))
  })
})

it('the \\u escapes survive untouched: the raw bytes hold them, the parsed event decodes them', async () => {
  const vector = vectors.find((v) => v.name === 'v2-unicode-escapes')!
  const result = await outcomeOf(vector, bytes(vector.bodyBase64), vector.headers)
  const raw = new TextDecoder().decode(result.delivery!.rawBody)
  expect(raw).toContain('Cr\\u00e8me br\\u00fbl\\u00e9e \\ud83c\\udf5d \\u4e88\\u7d04')
  const event = result.delivery!.event as { message: { text: string } }
  expect(event.message.text).toBe('Crème brûlée 🍝 予約 "quoted" \\ /')
})

// Both crypto builds against the OpenSSL answers: the node:crypto one Node resolves, and the
// WebCrypto one workerd and the Edge runtime resolve (imported by path: `#crypto` picks one). The
// node:crypto build has two HMAC paths (one-shot hashes up to 32 KiB, a stream above and where
// `crypto.hash` is missing): both run every vector.
interface CryptoBuild {
  importSecret(secret: string): unknown
  hmacHex(key: unknown, prefix: string, body: Uint8Array): string | Promise<string>
  hmacHexStreamed?(key: unknown, prefix: string, body: Uint8Array): string
  hmacMatches(key: unknown, prefix: string, body: Uint8Array, signatures: readonly string[]): boolean | Promise<boolean>
}
const build = async (name: string) => (await import(/* @vite-ignore */ new URL(`../../dist/crypto/${name}.js`, import.meta.url).href)) as CryptoBuild

describe.each([
  ['node', 'hmacHex'],
  ['node', 'hmacHexStreamed'],
  ['web', 'hmacHex'],
] as const)('dist/crypto/%s.js %s', (name, path) => {
  it('computes every expected v2 and v1 signature', async () => {
    const crypto = await build(name)
    const hmac = crypto[path]!
    for (const vector of vectors) {
      const key = crypto.importSecret(vector.signed.secret)
      const body = bytes(vector.signed.bodyBase64)
      expect(await hmac(key, `${vector.signed.id}.${vector.signed.timestamp}.`, body)).toBe(vector.expected.v2)
      expect(await hmac(key, `${vector.signed.timestamp}.`, body)).toBe(vector.expected.v1)
    }
  })
})

describe.each(['node', 'web'] as const)('dist/crypto/%s.js hmacMatches', (name) => {
  it('matches every expected signature, among others, and nothing else', async () => {
    const crypto = await build(name)
    for (const vector of vectors) {
      const key = crypto.importSecret(vector.signed.secret)
      const body = bytes(vector.signed.bodyBase64)
      const prefix = `${vector.signed.id}.${vector.signed.timestamp}.`
      const v2 = vector.expected.v2
      const other = vector.expected.v1
      expect(await crypto.hmacMatches(key, prefix, body, [v2])).toBe(true)
      expect(await crypto.hmacMatches(key, prefix, body, [other, v2])).toBe(true)
      expect(await crypto.hmacMatches(key, prefix, body, [other])).toBe(false)
      expect(await crypto.hmacMatches(key, prefix, body, [])).toBe(false)
      // Each of the 64 digits counts: the first or the last one changed is a mismatch.
      const flip = (digit: string) => (digit === '0' ? '1' : '0')
      expect(await crypto.hmacMatches(key, prefix, body, [`${flip(v2[0]!)}${v2.slice(1)}`])).toBe(false)
      expect(await crypto.hmacMatches(key, prefix, body, [`${v2.slice(0, 63)}${flip(v2[63]!)}`])).toBe(false)
    }
  })

  it('gives each of several calls in flight its own bytes', async () => {
    const crypto = await build(name)
    const pending = vectors.map((vector) => {
      const key = crypto.importSecret(vector.signed.secret)
      return crypto.hmacMatches(key, `${vector.signed.id}.${vector.signed.timestamp}.`, bytes(vector.signed.bodyBase64), [vector.expected.v2])
    })
    expect(await Promise.all(pending)).toEqual(vectors.map(() => true))
  })
})
