/**
 * Properties of verification, checked with fast-check against the built package: sign → verify
 * always passes; changing any byte of body, id, timestamp or signature is refused with the right
 * code; arbitrary headers only ever produce a WebhookVerificationError; any time outside the
 * window gives a timestamp code. Each property states its numRuns.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, isWebhookVerificationError, verifySignature, verifyWebhook } from 'svc-webhooks'
import { signWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_PropertyTestSecret0123456789'
const HEX = '0123456789abcdef'

/** A delivery id as the header can carry it: 1..64 visible ASCII characters. */
const idArb = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 64 })
/** A secret: any non-empty text without surrounding whitespace (UTF-8 encoded as the key). */
const secretArb = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).filter((s) => s.trim() === s && s.length > 0)
/** Unix seconds with 1 to 10 digits (the accepted range). */
const timestampArb = fc.integer({ min: 0, max: 9_999_999_999 })

/** What verification threw, as its code; fails the property on any other exception. */
async function codeOf(run: Promise<unknown>): Promise<string> {
  try {
    await run
    return 'ok'
  } catch (error) {
    if (!isWebhookVerificationError(error)) throw error
    return error.code
  }
}

function flip(text: string, index: number, mask: number): string {
  const i = index % text.length
  return text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ mask) + text.slice(i + 1)
}

describe('sign → verify', () => {
  it('always verifies an event signed by signWebhook, with any secret, id and timestamp (numRuns 500)', async () => {
    await fc.assert(
      fc.asyncProperty(
        secretArb,
        idArb,
        timestampArb,
        fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 5 }),
        fc.string({ unit: 'grapheme' }),
        async (secret, id, timestamp, extra, text) => {
          const event = { ...extra, event: 'message.received', message: { text } }
          const signed = await signWebhook({ secret, event, id, timestamp })
          const delivery = await verifyWebhook(
            { body: signed.rawBody, headers: signed.headers },
            { secret, now: () => timestamp * 1000 },
          )
          expect(delivery.id).toBe(id)
          expect(delivery.timestamp).toBe(timestamp)
          expect(delivery.signatureVersion).toBe('v2')
          expect(delivery.event).toEqual(JSON.parse(signed.body))
        },
      ),
      { numRuns: 500 },
    )
  })

  it('always verifies arbitrary body bytes, and finds the signing secret among several (numRuns 500)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(secretArb, { minLength: 1, maxLength: 4 }),
        fc.nat(),
        fc.uint8Array({ maxLength: 512 }),
        idArb,
        async (secrets, pick, body, id) => {
          const index = pick % secrets.length
          const signed = await signWebhook({ secret: secrets[index]!, body, id, timestamp: 1_763_806_530 })
          const verified = await verifySignature(
            { body, headers: signed.headers },
            { secret: secrets, now: () => 1_763_806_530_000 },
          )
          expect(verified.secretIndex).toBe(index)
          expect(verified.rawBody).toEqual(body)
        },
      ),
      { numRuns: 500 },
    )
  })
})

describe('any changed byte is refused with the right code', () => {
  const NOW = 1_763_806_530
  const verifyAt = (body: Uint8Array, headers: Record<string, string>) =>
    codeOf(verifySignature({ body, headers }, { secret: SECRET, now: () => NOW * 1000 }))

  it('body: one flipped bit pattern in any byte → invalid_signature (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 256 }), fc.nat(), fc.integer({ min: 1, max: 255 }), async (body, at, mask) => {
        const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
        const tampered = body.slice()
        tampered[at % body.length]! ^= mask
        expect(await verifyAt(tampered, signed.headers)).toBe('invalid_signature')
      }),
      { numRuns: 1000 },
    )
  })

  it('id: a changed byte → invalid_signature, or invalid_id when it is no longer visible ASCII (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(idArb, fc.nat(), fc.integer({ min: 1, max: 255 }), async (id, at, mask) => {
        const signed = await signWebhook({ secret: SECRET, body: '{"event":"x"}', id, timestamp: NOW })
        const tampered = flip(id, at, mask)
        const c = tampered.charCodeAt(at % id.length)
        const expected = c > 0x20 && c < 0x7f ? 'invalid_signature' : 'invalid_id'
        expect(await verifyAt(signed.rawBody, { ...signed.headers, 'svc-webhook-id': tampered })).toBe(expected)
      }),
      { numRuns: 1000 },
    )
  })

  it('timestamp: a changed byte → invalid_timestamp, a timestamp code, or invalid_signature (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: -300, max: 300 }), fc.nat(), fc.integer({ min: 1, max: 255 }), async (skew, at, mask) => {
        const timestamp = NOW + skew
        const signed = await signWebhook({ secret: SECRET, body: '{"event":"x"}', timestamp })
        const tampered = flip(String(timestamp), at, mask)
        let expected: string
        if (!/^[0-9]{1,10}$/.test(tampered)) expected = 'invalid_timestamp'
        else if (NOW - Number(tampered) > 300) expected = 'timestamp_too_old'
        else if (Number(tampered) - NOW > 300) expected = 'timestamp_in_future'
        else expected = 'invalid_signature'
        expect(await verifyAt(signed.rawBody, { ...signed.headers, 'svc-webhook-timestamp': tampered })).toBe(expected)
      }),
      { numRuns: 1000 },
    )
  })

  it('signature: any flipped bit of the 32 signature bytes → invalid_signature (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 64 }), fc.integer({ min: 0, max: 31 }), fc.integer({ min: 1, max: 255 }), async (body, at, mask) => {
        const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
        const digest = Buffer.from(signed.headers['svc-webhook-signature-v2']!.slice(3), 'hex')
        digest[at]! ^= mask
        const header = `v2=${digest.toString('hex')}`
        expect(await verifyAt(body, { ...signed.headers, 'svc-webhook-signature-v2': header })).toBe('invalid_signature')
      }),
      { numRuns: 1000 },
    )
  })

  it('signature header: any changed character → invalid_signature, unless it only changed a hex digit\'s case (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 64 }), fc.nat(), fc.integer({ min: 1, max: 255 }), async (body, at, mask) => {
        const signed = await signWebhook({ secret: SECRET, body, timestamp: NOW })
        const header = signed.headers['svc-webhook-signature-v2']!
        const tampered = flip(header, at, mask)
        // Hex digits are accepted in either case: 'A' and 'a' are the same signature byte.
        const sameBytes = tampered.slice(0, 3) === 'v2=' && tampered.slice(3).toLowerCase() === header.slice(3)
        const code = await verifyAt(body, { ...signed.headers, 'svc-webhook-signature-v2': tampered })
        expect(code).toBe(sameBytes ? 'ok' : 'invalid_signature')
      }),
      { numRuns: 1000 },
    )
  })
})

describe('arbitrary headers and bodies', () => {
  const hex64 = fc.string({ unit: fc.constantFrom(...HEX), minLength: 64, maxLength: 64 })
  const textArb = fc.oneof(
    fc.string({ maxLength: 80 }),
    fc.string({ unit: 'binary', maxLength: 80 }),
    fc.constantFrom('', ' ', ',', 'v2=', 'v1=', '0', '-1', '1e9', '１２３', '1763806530', '99999999999'),
  )
  const oneOrMany = (arb: fc.Arbitrary<string>) =>
    fc.oneof({ weight: 4, arbitrary: arb }, { weight: 1, arbitrary: fc.array(arb, { maxLength: 3 }) })
  // Each known header is usually present, so runs get past the first check and reach the later ones.
  const known = {
    'svc-webhook-id': oneOrMany(fc.oneof({ weight: 3, arbitrary: idArb }, { weight: 1, arbitrary: textArb })),
    'svc-webhook-timestamp': oneOrMany(
      fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1_763_806_000, max: 1_763_807_000 }).map(String) }, { weight: 1, arbitrary: textArb }),
    ),
    'svc-webhook-signature-v2': oneOrMany(
      fc.oneof(
        hex64.map((h) => `v2=${h}`),
        fc.array(hex64, { maxLength: 4 }).map((hs) => hs.map((h) => `v2=${h}`).join(', ')),
        textArb,
      ),
    ),
    'svc-webhook-signature': oneOrMany(fc.oneof(hex64.map((h) => `v1=${h}`), textArb)),
    'svc-webhook-event': oneOrMany(textArb),
  }
  const headersArb = fc
    .tuple(
      fc.record(known, { requiredKeys: [] }),
      fc.dictionary(fc.string({ maxLength: 30 }), oneOrMany(textArb), { maxKeys: 3 }),
      fc.boolean(),
    )
    .map(([headers, extra, upper]) => {
      const out: Record<string, string | string[] | undefined> = { ...extra }
      for (const [name, value] of Object.entries(headers)) out[upper ? name.toUpperCase() : name] = value
      return out
    })
  const bodyArb = fc.oneof(
    fc.string({ maxLength: 60 }),
    fc.uint8Array({ maxLength: 60 }),
    fc.uint8Array({ minLength: 41, maxLength: 100 }), // over maxBodyBytes: 40
    fc.constant('{"event":"message.received"}'),
  )

  it('verifyWebhook only ever throws a WebhookVerificationError (numRuns 2000)', async () => {
    const seen = new Set<string>()
    await fc.assert(
      fc.asyncProperty(headersArb, bodyArb, async (headers, body) => {
        const code = await codeOf(verifyWebhook({ body, headers }, { secret: SECRET, maxBodyBytes: 40, now: () => 1_763_806_530_000 }))
        expect(code).not.toBe('ok')
        seen.add(code)
      }),
      { numRuns: 2000 },
    )
    // The runs reached every check, not just the first one.
    for (const code of ['missing_id', 'invalid_id', 'invalid_timestamp', 'missing_signature', 'v1_not_allowed', 'invalid_signature', 'body_too_large']) {
      expect(seen).toContain(code)
    }
  })

  it('the receiver answers them with a permanent 4xx refusal, never 2xx or 5xx (numRuns 500)', async () => {
    let runs = 0
    const receiver = createWebhookReceiver({
      secret: SECRET,
      allowV1: true,
      maxBodyBytes: 40,
      now: () => 1_763_806_530_000,
      on: { 'message.received': () => void runs++ },
    })
    await fc.assert(
      fc.asyncProperty(headersArb, bodyArb, async (headers, body) => {
        const answer = await receiver.handle({ method: 'POST', body, headers })
        expect([400, 401, 413]).toContain(answer.status)
        expect(Object.keys(JSON.parse(answer.body) as object).sort()).toEqual(['code', 'ok'])
      }),
      { numRuns: 500 },
    )
    expect(runs).toBe(0)
  })
})

describe('the timestamp window', () => {
  it('any time more than toleranceSeconds away gives timestamp_too_old / timestamp_in_future; inside it passes (numRuns 1000)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1_000_000_000, max: 9_999_999_999 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: -1_000_000, max: 1_000_000 }),
        fc.integer({ min: 0, max: 999 }),
        async (timestamp, toleranceSeconds, skew, ms) => {
          const signed = await signWebhook({ secret: SECRET, body: '{"event":"message.received"}', timestamp })
          const now = () => (timestamp + skew) * 1000 + ms
          const code = await codeOf(verifySignature({ body: signed.rawBody, headers: signed.headers }, { secret: SECRET, toleranceSeconds, now }))
          const expected = skew > toleranceSeconds ? 'timestamp_too_old' : -skew > toleranceSeconds ? 'timestamp_in_future' : 'ok'
          expect(code).toBe(expected)
        },
      ),
      { numRuns: 1000 },
    )
  })
})

describe('the node:crypto build HMAC', () => {
  // Imported by path: the one-shot path (RFC 2104 over `crypto.hash`) against node:crypto's own
  // createHmac, for keys around the 64-byte block and bodies around the 32 KiB switch to streaming.
  const keyArb = fc.oneof(
    secretArb,
    fc.string({ unit: 'binary', minLength: 1, maxLength: 200 }),
    // ASCII around the block size: 64 bytes is used as is, 65 is hashed first.
    fc.string({ unit: fc.constantFrom('a', 'Z', '0', '_'), minLength: 62, maxLength: 66 }),
  )
  const bodyArb = fc.oneof(
    fc.uint8Array({ maxLength: 1024 }),
    fc.integer({ min: 32 * 1024 - 600, max: 32 * 1024 + 600 }).map((n) => new Uint8Array(n).map((_, i) => (i * 31 + n) & 0xff)),
  )
  const prefixArb = fc.tuple(idArb, timestampArb).map(([id, ts]) => `${id}.${ts}.`)

  it('hmacHex equals createHmac hex for any key, prefix and body (numRuns 300)', async () => {
    const { createHmac } = await import('node:crypto')
    const build = (await import(/* @vite-ignore */ new URL('../../dist/crypto/node.js', import.meta.url).href)) as {
      importSecret(secret: string): unknown
      hmacHex(key: unknown, prefix: string, body: Uint8Array): string
    }
    fc.assert(
      fc.property(keyArb, prefixArb, bodyArb, (secret, prefix, body) => {
        const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(prefix, 'latin1').update(body).digest('hex')
        // Twice with one key: the pads and the shared buffer are reused.
        const key = build.importSecret(secret)
        expect(build.hmacHex(key, prefix, body)).toBe(expected)
        expect(build.hmacHex(key, prefix, body)).toBe(expected)
      }),
      { numRuns: 300 },
    )
  })
})
