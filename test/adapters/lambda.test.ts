/**
 * `svc-webhooks/lambda` invoked directly with the events Lambda hands it (that is the Lambda
 * contract): API Gateway REST (payload v1), HTTP API (payload v2) and function URL events, built
 * from the documented shapes in fixtures/lambda/*.json, bodies base64-encoded and not. The shared
 * case table runs through each event source; then what only Lambda has: base64 bodies measured
 * on their decoded bytes, repeated headers as each source delivers them, odd events, the types.
 */
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyHandler,
  APIGatewayProxyHandlerV2,
  Context,
  LambdaFunctionURLHandler,
} from 'aws-lambda'
import { describe, expect, it } from 'vitest'
import { MemoryInbox } from 'svc-webhooks'
import { webhooks, type LambdaWebhookEvent, type LambdaWebhookResult } from 'svc-webhooks/lambda'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { createCaseApp, CASE_MAX_BODY_BYTES, CASE_SECRET, tenantFromPath, variantFromPath, type CaseApp, type CaseVariant } from '../support/case-app.js'
import { describeCaseTable, lambdaTransport } from '../support/case-table.js'
import { eventOf, LAMBDA_SOURCES, loadEvent, type LambdaSource } from '../support/lambda-events.js'

const signedEvent = (source: LambdaSource, signed: SignedWebhook, base64: boolean) =>
  eventOf(source, { body: signed.rawBody, headers: signed.headers, base64 })

function message(text: string) {
  const event = sampleEvent('message.received')
  event.message.text = text
  return event
}

const json = (result: LambdaWebhookResult) => JSON.parse(result.body) as Record<string, unknown>

/** The fields of an event that say where it was sent, as @types/aws-lambda has them (LambdaWebhookEvent has only what the adapter reads). */
type Routed = Partial<Pick<APIGatewayProxyEvent, 'path' | 'pathParameters'> & Pick<APIGatewayProxyEventV2, 'rawPath'>>

/**
 * The tenant an event is for: the `{tenant}` path parameter of the API Gateway route (REST and
 * HTTP APIs), or, for a function URL (no routes), the tenant in `rawPath`.
 */
function tenantOf(event: LambdaWebhookEvent): string | undefined {
  const routed = event as LambdaWebhookEvent & Routed
  return routed.pathParameters?.tenant ?? tenantFromPath(routed.rawPath ?? routed.path)
}

/** The variant route an event is for: its `{variant}` path parameter, or the variant in its path. */
function variantOf(event: LambdaWebhookEvent): CaseVariant | undefined {
  const routed = event as LambdaWebhookEvent & Routed
  return variantFromPath(routed.pathParameters?.variant === undefined ? (routed.rawPath ?? routed.path) : `/variants/${routed.pathParameters.variant}/webhooks`)
}

/**
 * What a JSON body parser middleware (middy's http-json-body-parser) does before the handler:
 * the event's body, base64-decoded when it is, replaced by the parsed JSON.
 */
function parseJsonBody(event: LambdaWebhookEvent): LambdaWebhookEvent {
  const text = event.isBase64Encoded && event.body ? Buffer.from(event.body, 'base64').toString('utf8') : (event.body ?? '')
  return { ...event, body: JSON.parse(text) as string, isBase64Encoded: false }
}

/**
 * The case app as one function behind every route: the tenant routes to the multi-tenant
 * handler, each variant route to its own, the parsed-body one behind {@link parseJsonBody}.
 */
function caseFunction(app: CaseApp): (event: LambdaWebhookEvent) => Promise<LambdaWebhookResult> {
  const single = webhooks(app.options)
  const tenants = webhooks(app.tenantOptions(tenantOf))
  const variants = app.variants((options) => webhooks(options))
  return (event) => {
    const variant = variantOf(event)
    if (variant === 'parsed-body') return variants[variant](parseJsonBody(event))
    if (variant !== undefined) return variants[variant](event)
    return tenantOf(event) === undefined ? single(event) : tenants(event)
  }
}

for (const source of LAMBDA_SOURCES) {
  for (const base64 of [false, true]) {
    const name = `lambda: ${source}${base64 ? ', base64 body' : ''}`

    describeCaseTable(
      name,
      async () => {
        const app = createCaseApp({ inbox: () => new MemoryInbox() })
        return lambdaTransport(caseFunction(app), app, { source, base64 })
      },
      { lacks: { 'stalled-body': 'Lambda hands the function the whole body, buffered by the service in front of it' } },
    )

    describe(name, () => {
      const app = createCaseApp()
      const handler = webhooks(app.options)
      const runs = (id: string) => app.record().runs[id] ?? 0
      const invoke = (signed: SignedWebhook) => handler(signedEvent(source, signed, base64))

      it('valid delivery with non-ASCII text -> 200, the handler sees the exact bytes, runs once', async () => {
        let seen: Uint8Array | undefined
        const spy = webhooks({ ...app.options, on: { 'message.received': (_e, d) => void (seen = d.rawBody) } })
        const signed = await signWebhook({ secret: CASE_SECRET, event: sampleEvent('message.received') })
        expect(signed.body).toContain('¿tienen mesa para dos a las 20:00? 🍝')
        const result = await spy(signedEvent(source, signed, base64))
        expect(result).toEqual({
          statusCode: 200,
          headers: { 'content-type': 'application/json' },
          body: '{"ok":true}',
          isBase64Encoded: false,
        })
        expect(seen).toEqual(signed.rawBody)

        const again = await signWebhook({ secret: CASE_SECRET, event: message('hello ünïcödé ✓') })
        expect((await invoke(again)).statusCode).toBe(200)
        expect(runs(again.id)).toBe(1)
      })

      it('tampered body -> 401 invalid_signature; the answer holds no secret, signature or body', async () => {
        const signed = await signWebhook({ secret: CASE_SECRET, event: message('pay 10') })
        const body = signed.body.replace('pay 10', 'pay 99')
        const result = await handler(eventOf(source, { body, headers: signed.headers, base64 }))
        expect(result.statusCode).toBe(401)
        expect(json(result)).toEqual({ ok: false, code: 'invalid_signature' })
        const text = JSON.stringify(result)
        for (const secretish of [CASE_SECRET, signed.headers['svc-webhook-signature-v2']!.slice(3), 'pay 99']) {
          expect(text).not.toContain(secretish)
        }
        expect(runs(signed.id)).toBe(0)
      })

      it('oversize body -> 413 body_too_large, measured on the decoded bytes', async () => {
        const big = await signWebhook({ secret: CASE_SECRET, body: `{"event":"message.received","pad":"${'x'.repeat(CASE_MAX_BODY_BYTES)}"}` })
        const result = await invoke(big)
        expect(result.statusCode).toBe(413)
        expect(json(result)).toEqual({ ok: false, code: 'body_too_large' })
        expect(runs(big.id)).toBe(0)
        // Its base64 text is a third larger than the limit; the decoded bytes fit, so it is accepted.
        const fits = await signWebhook({ secret: CASE_SECRET, event: message('y'.repeat(CASE_MAX_BODY_BYTES - 1024)) })
        expect(fits.rawBody.byteLength).toBeLessThanOrEqual(CASE_MAX_BODY_BYTES)
        expect((await invoke(fits)).statusCode).toBe(200)
      })

      it('signature header repeated or comma-joined, one value right -> 200 (rotation, rule 7)', async () => {
        const signed = await signWebhook({ secret: CASE_SECRET, event: message('two signatures') })
        const wrong = `v2=${'0'.repeat(64)}`
        const headers = { ...signed.headers, 'svc-webhook-signature-v2': [wrong, signed.headers['svc-webhook-signature-v2']!] }
        const result = await handler(eventOf(source, { body: signed.rawBody, headers, base64 }))
        expect(result.statusCode).toBe(200)
        expect(runs(signed.id)).toBe(1)
      })

      it('repeated delivery id header -> a permanent 4xx, handler not run', async () => {
        const signed = await signWebhook({ secret: CASE_SECRET, event: message('two ids') })
        const headers = { ...signed.headers, 'svc-webhook-id': [signed.id, 'another-id'] }
        const result = await handler(eventOf(source, { body: signed.rawBody, headers, base64 }))
        // v1 hands over both values (400 invalid_id); v2 joins them with a bare comma into one id
        // that the signature does not cover (401 invalid_signature).
        const expected = source === 'rest-api-v1' ? 'invalid_id' : 'invalid_signature'
        expect(json(result)).toEqual({ ok: false, code: expected })
        expect(result.statusCode).toBe(expected === 'invalid_id' ? 400 : 401)
        expect(runs(signed.id)).toBe(0)
      })
    })
  }
}

describe('lambda: bytes and odd events', () => {
  const app = createCaseApp()
  const handler = webhooks(app.options)

  it('a base64 body that is not UTF-8 reaches the signature check byte for byte (400 invalid_json, not 401)', async () => {
    const bytes = new Uint8Array([0x7b, 0xff, 0xfe, 0x00, 0xc3, 0x28, 0x7d])
    const signed = await signWebhook({ secret: CASE_SECRET, body: bytes })
    for (const source of LAMBDA_SOURCES) {
      const result = await handler(eventOf(source, { body: bytes, headers: signed.headers, base64: true }))
      expect(json(result)).toEqual({ ok: false, code: 'invalid_json' })
    }
  })

  it('REST API event with null headers and body -> 400 missing_id', async () => {
    const event = { ...loadEvent<APIGatewayProxyEvent>('rest-api-v1.json'), headers: null, multiValueHeaders: null }
    const result = await handler(event as unknown as LambdaWebhookEvent)
    expect(result.statusCode).toBe(400)
    expect(json(result)).toEqual({ ok: false, code: 'missing_id' })
  })

  it('is the handler type @types/aws-lambda gives each event source (typechecked), and answers through it', async () => {
    const rest: APIGatewayProxyHandler = handler
    const httpApi: APIGatewayProxyHandlerV2 = handler
    const functionUrl: LambdaFunctionURLHandler = handler
    const context = { functionName: 'webhooks', awsRequestId: 'req-1' } as Context
    const get = { body: null, headers: {}, method: 'GET' }
    expect(await rest(eventOf('rest-api-v1', get) as APIGatewayProxyEvent, context, () => {})).toMatchObject({ statusCode: 405 })
    expect(await httpApi(eventOf('http-api-v2', get) as APIGatewayProxyEventV2, context, () => {})).toMatchObject({ statusCode: 405 })
    expect(await functionUrl(eventOf('function-url', get) as APIGatewayProxyEventV2, context, () => {})).toMatchObject({ statusCode: 405 })
  })

  it('an empty secret is refused when the handler is created', () => {
    expect(() => webhooks({ ...app.options, secret: '' })).toThrow(TypeError)
  })
})
