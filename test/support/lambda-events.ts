/**
 * The events Lambda hands a function: API Gateway REST (payload v1), HTTP API (payload v2) and
 * function URL events, built from the documented shapes in fixtures/lambda/*.json with a request's
 * method, path (and the API Gateway route it matched, with its path parameters), headers and
 * body, bodies base64-encoded or not.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda'
import type { LambdaWebhookEvent } from 'svc-webhooks/lambda'

const fixtures = join(import.meta.dirname, '../../fixtures/lambda')

/** A documented event of fixtures/lambda, freshly parsed (callers may change it). */
export const loadEvent = <T>(name: string): T => JSON.parse(readFileSync(join(fixtures, name), 'utf8')) as T

export type LambdaSource = 'rest-api-v1' | 'http-api-v2' | 'function-url'
export const LAMBDA_SOURCES: readonly LambdaSource[] = ['rest-api-v1', 'http-api-v2', 'function-url']

/** REST APIs keep the header case the sender used; HTTP APIs and function URLs lowercase names. */
const titleCase = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase())

export interface EventParts {
  body: string | Uint8Array | null
  /** A list is a header sent several times. */
  headers: Readonly<Record<string, string | readonly string[]>>
  base64?: boolean
  /** @default 'POST' */
  method?: string
  /** The request path, without a stage. @default the fixture's, '/webhooks/svc' */
  path?: string
  /**
   * The API Gateway route the path matched (REST and HTTP APIs; a function URL has no routes),
   * e.g. `{ resource: '/tenants/{tenant}/webhooks', pathParameters: { tenant: 'acme' } }`.
   * @default the path itself, no path parameters
   */
  route?: { resource: string; pathParameters: Readonly<Record<string, string>> }
}

/**
 * A documented event of `source` carrying `parts` the way that source delivers them.
 *
 * @example
 * await handler(eventOf('http-api-v2', { body: signed.rawBody, headers: signed.headers, base64: true }))
 */
export function eventOf(source: LambdaSource, parts: EventParts): LambdaWebhookEvent {
  const bytes = typeof parts.body === 'string' ? new TextEncoder().encode(parts.body) : parts.body
  const body = bytes === null ? null : parts.base64 ? Buffer.from(bytes).toString('base64') : new TextDecoder().decode(bytes)
  const method = parts.method ?? 'POST'
  if (source === 'rest-api-v1') {
    const event = loadEvent<APIGatewayProxyEvent>('rest-api-v1.json')
    for (const [name, value] of Object.entries(parts.headers)) {
      const values = typeof value === 'string' ? [value] : [...value]
      event.headers[titleCase(name)] = values.at(-1) // REST APIs keep only the last value in `headers`
      event.multiValueHeaders[titleCase(name)] = values
    }
    event.httpMethod = method
    event.requestContext.httpMethod = method
    if (parts.path !== undefined) {
      event.path = parts.path
      event.requestContext.path = `/${event.requestContext.stage}${parts.path}`
      event.resource = event.requestContext.resourcePath = parts.route?.resource ?? parts.path
      event.pathParameters = parts.route ? { ...parts.route.pathParameters } : null
    }
    return { ...event, body, isBase64Encoded: parts.base64 === true }
  }
  const event = loadEvent<APIGatewayProxyEventV2>(`${source}.json`)
  for (const [name, value] of Object.entries(parts.headers)) {
    event.headers[name.toLowerCase()] = typeof value === 'string' ? value : value.join(',')
  }
  event.requestContext.http.method = method
  if (parts.path !== undefined) {
    event.rawPath = event.requestContext.http.path = parts.path
    if (source === 'http-api-v2') {
      event.routeKey = event.requestContext.routeKey = `${method} ${parts.route?.resource ?? parts.path}`
      if (parts.route) event.pathParameters = { ...parts.route.pathParameters }
      else delete event.pathParameters
    }
  }
  return { ...event, ...(body === null ? {} : { body }), isBase64Encoded: parts.base64 === true }
}
