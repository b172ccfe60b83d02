/**
 * `svc-webhooks/lambda`: AWS Lambda behind API Gateway REST (payload v1), HTTP API (payload v2)
 * and function URLs (v2 shape). Only translation: the event's body back to the exact bytes sent,
 * its headers and method to the core's request, the core's answer to the proxy result shape.
 */
import { createWebhookReceiver, type WebhookReceiverOptions, type WebhookStatsSource, type WebhookTransport } from '../src/index.js'
import { fromBase64 } from '../src/base64.js'
import { getHeader } from '../src/headers.js'
import { toBytes } from '../src/input.js'

/** Options of {@link webhooks}: the receiver's options. */
export type LambdaWebhookOptions = WebhookReceiverOptions<LambdaWebhookEvent>

/** A header map as the events carry it (`APIGatewayProxyEventHeaders`); `null` when there is none. */
type LambdaEventHeaders = { readonly [name: string]: string | undefined }

/**
 * An API Gateway REST API (payload 1.0) proxy event: only the fields read. Declared here rather
 * than imported from `aws-lambda` so the package's types need no @types/aws-lambda; its
 * `APIGatewayProxyEvent` (and the authorizer variants) fit this shape.
 */
interface LambdaRestApiEvent {
  httpMethod: string
  headers?: LambdaEventHeaders | null | undefined
  /** Every value of a repeated header (`headers` has the last one only). */
  multiValueHeaders?: { readonly [name: string]: readonly string[] | undefined } | null | undefined
  body?: string | null | undefined
  isBase64Encoded?: boolean | undefined
  /** For a `secret` or `endpoint` function: the path and its parameters (`/webhooks/{tenant}`). */
  path?: string | undefined
  pathParameters?: { readonly [name: string]: string | undefined } | null | undefined
}

/**
 * An HTTP API (payload 2.0) or function URL event: only the fields read. `APIGatewayProxyEventV2`
 * and `LambdaFunctionURLEvent` from @types/aws-lambda (and the authorizer variants) fit this shape.
 */
interface LambdaHttpApiEvent {
  requestContext: { readonly http: { readonly method: string } }
  /** Repeated headers arrive comma-joined. */
  headers?: LambdaEventHeaders | null | undefined
  body?: string | null | undefined
  isBase64Encoded?: boolean | undefined
  /** For a `secret` or `endpoint` function: the path and its parameters (`/webhooks/{tenant}`). */
  rawPath?: string | undefined
  pathParameters?: { readonly [name: string]: string | undefined } | null | undefined
}

/**
 * An API Gateway REST (v1) proxy event, or an HTTP API (v2) / function URL event: the fields the
 * handler reads, so the events typed by @types/aws-lambda (`APIGatewayProxyEvent`,
 * `APIGatewayProxyEventV2`, `LambdaFunctionURLEvent`) can be passed as they are.
 */
export type LambdaWebhookEvent = LambdaRestApiEvent | LambdaHttpApiEvent

/** The answer, valid for every event source above (`APIGatewayProxyResult` and the v2 result). */
export interface LambdaWebhookResult {
  statusCode: number
  headers: Record<string, string>
  body: string
  isBase64Encoded: false
}

/**
 * Creates a Lambda handler that verifies, deduplicates, dispatches and answers. Each instance of
 * the function keeps its own `MemoryStore`: give `store` a `RedisStore` so instances share dedupe.
 * The handler fits @types/aws-lambda's `Handler`, `APIGatewayProxyHandler`,
 * `APIGatewayProxyHandlerV2` and `LambdaFunctionURLHandler` (the Lambda context is not used).
 *
 * @example
 * import { webhooks } from 'svc-webhooks/lambda'
 * export const handler = webhooks({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 */
export function webhooks(
  options: LambdaWebhookOptions,
): ((event: LambdaWebhookEvent, context?: unknown) => Promise<LambdaWebhookResult>) & WebhookStatsSource {
  const receiver = createWebhookReceiver(options)
  const handler = async (event: LambdaWebhookEvent): Promise<LambdaWebhookResult> => {
    const answer = await receiver.receive(event, lambdaTransport)
    return { statusCode: answer.status, headers: { ...answer.headers }, body: answer.body, isBase64Encoded: false }
  }
  return Object.assign(handler, { stats: () => receiver.stats(), replay: receiver.replay })
}

/** The event as the core reads it. API Gateway buffered the body already: there is nothing to time or drain. */
const lambdaTransport: WebhookTransport<LambdaWebhookEvent> = {
  method: (event) => ('httpMethod' in event ? event.httpMethod : event.requestContext?.http?.method),
  header(event, name) {
    // v1 repeats a header in `multiValueHeaders` (last value only in `headers`); v2 joins with commas.
    const multi = 'multiValueHeaders' in event && event.multiValueHeaders ? getHeader(event.multiValueHeaders, name) : undefined
    if (Array.isArray(multi) && multi.length > 1) return multi
    return getHeader(event.headers ?? {}, name)
  },
  // A middleware ran first and parsed the body (middy's JSON body parser): the signed text is gone.
  consumed: (event) => event.body != null && typeof event.body !== 'string',
  body(event, maxBodyBytes) {
    // A plain body is the UTF-8 text as received; the core measures maxBodyBytes on the bytes.
    // API Gateway base64-encodes binary media types, and function URLs non-text bodies.
    return toBytes(event.isBase64Encoded && event.body ? fromBase64(event.body) : (event.body ?? ''), maxBodyBytes)
  },
}
