/**
 * The case table's targets, as transports: `send(request) -> response` to a case app's webhook
 * route, and `record()` for the case app's record of handler runs. Over real HTTP (fetch to
 * 127.0.0.1), in process (a Fetch handler or a receiver's `handle` called directly, the record
 * read from the case app itself), or through the events Lambda hands a function.
 */
import type { WebhookReceiver } from 'svc-webhooks'
import type { LambdaWebhookEvent, LambdaWebhookResult } from 'svc-webhooks/lambda'
import type { CaseApp, RunsRecord } from './case-app.js'
import { CASE_PATH, RUNS_PATH } from './case-table-constants.js'
import { eventOf, type LambdaSource } from './lambda-events.js'

export type { RunsRecord }

/** A request to the case app's webhook route. */
export interface CaseRequest {
  method: string
  headers: Readonly<Record<string, string>>
  /** Null for a request without a body. */
  body: Uint8Array | null
}

/** The answer as the sender sees it. */
export interface CaseResponse {
  status: number
  /** Header names lowercased. */
  headers: Readonly<Record<string, string>>
  body: string
}

export interface CaseTransport {
  send(request: CaseRequest): Promise<CaseResponse>
  /** The case app's record of handler runs and attempts. */
  record(): Promise<RunsRecord>
  /** Stops what the transport started (a server); called once its table is done. */
  close?(): Promise<void>
}

/** A case app served over HTTP, e.g. by `listen()` from servers.ts. */
export interface HttpTarget {
  /** Base URL, e.g. http://127.0.0.1:43123 */
  url: string
  /** Path of the webhook route. @default CASE_PATH */
  path?: string
  /** Path of the runs record. @default RUNS_PATH */
  runsPath?: string
  close?: () => Promise<void>
}

/**
 * Real HTTP: fetch to the target's URL.
 *
 * @example
 * describeCaseTable('express 5', async () => httpTransport(await listen(app)))
 */
export function httpTransport(target: HttpTarget): CaseTransport {
  if (!/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(target.url)) throw new Error(`not a local base URL: ${target.url}`)
  return {
    async send({ method, headers, body }) {
      const res = await fetch(target.url + (target.path ?? CASE_PATH), { method, headers, body: body as BodyInit | null })
      return { status: res.status, headers: headersOf(res), body: await res.text() }
    },
    async record() {
      const res = await fetch(target.url + (target.runsPath ?? RUNS_PATH))
      if (!res.ok) throw new Error(`${target.runsPath ?? RUNS_PATH} answered ${res.status}: ${await res.text()}`)
      return (await res.json()) as RunsRecord
    },
    ...(target.close ? { close: target.close } : {}),
  }
}

/**
 * In process: a Fetch handler called with a `Request`, no server between.
 *
 * @example
 * describeCaseTable('fetch, in process', async () => { const app = createCaseApp(); return fetchTransport(createFetchHandler(app.options), app) })
 */
export function fetchTransport(handler: (request: Request) => Response | Promise<Response>, app: CaseApp): CaseTransport {
  return {
    async send({ method, headers, body }) {
      const res = await handler(new Request(`http://127.0.0.1${CASE_PATH}`, { method, headers, body: body as BodyInit | null }))
      return { status: res.status, headers: headersOf(res), body: await res.text() }
    },
    record: async () => app.record(),
  }
}

/**
 * In process: the core's `receiver.handle()`, with the body already held as bytes.
 *
 * @example
 * const app = createCaseApp()
 * describeCaseTable('core', async () => receiverTransport(createWebhookReceiver(app.options), app))
 */
export function receiverTransport(receiver: Pick<WebhookReceiver, 'handle'>, app: CaseApp): CaseTransport {
  return {
    async send({ method, headers, body }) {
      const { status, headers: answerHeaders, body: text } = await receiver.handle({ method, headers: { ...headers }, body: body ?? new Uint8Array(0) })
      return { status, headers: lowercased(answerHeaders), body: text }
    },
    record: async () => app.record(),
  }
}

/**
 * Through Lambda: each request becomes the event `source` hands the function (the body
 * base64-encoded when `base64`), and the proxy result becomes the response.
 *
 * @example
 * describeCaseTable('lambda: HTTP API', async () => { const app = createCaseApp(); return lambdaTransport(webhooks(app.options), app, { source: 'http-api-v2' }) })
 */
export function lambdaTransport(
  handler: (event: LambdaWebhookEvent) => Promise<LambdaWebhookResult>,
  app: CaseApp,
  { source, base64 = false }: { source: LambdaSource; base64?: boolean },
): CaseTransport {
  return {
    async send({ method, headers, body }) {
      const result = await handler(eventOf(source, { method, headers, body, base64 }))
      return { status: result.statusCode, headers: lowercased(result.headers), body: result.body }
    },
    record: async () => app.record(),
  }
}

function headersOf(response: Response): Record<string, string> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => (headers[name] = value))
  return headers
}

function lowercased(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]))
}
