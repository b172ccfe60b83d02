/**
 * HTTP edges on real servers (127.0.0.1, port 0), the same table for four servers:
 * createNodeHandler on http.createServer, Express 5, Hono on @hono/node-server, Fastify 5.
 *
 * 1. Stalled bodies: every check that does not need the body (id, timestamp format and window,
 *    signature header presence and format, v1-only refusal) answers before the body is read, and
 *    the body read has a deadline (`bodyTimeoutMs`) answered 503 body_timeout + Retry-After or by
 *    closing the connection; never 408 (permanent for the sender), never a hang.
 * 2. Content types: the signature covers bytes, so no Content-Type (or an odd one) is refused.
 * 3. Oversize bodies: the client reads the 413 every time, never a reset before it. A server that
 *    closes with the body unread makes the kernel answer the client's next bytes with a RST, and a
 *    client still writing (or one that reads only after writing) gets EPIPE/ECONNRESET instead of
 *    the answer; answering and draining the rest (bounded) keeps the answer readable.
 * 4. An async onResult that rejects neither kills the process nor changes the answer.
 *
 * Waits are bounded (BOUNDED_WAIT_MS per exchange, a budget per repeated loop); nothing asserts
 * on wall time beyond "an answer came within the bounded wait".
 */
import { getRequestListener } from '@hono/node-server'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { WebhookReceiverOptions } from 'svc-webhooks'
import { webhooks as expressWebhooks } from 'svc-webhooks/express'
import { webhooksPlugin } from 'svc-webhooks/fastify'
import { webhooks as honoWebhooks } from 'svc-webhooks/hono'
import { createNodeHandler } from 'svc-webhooks/node'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { destroyRawSockets, rawExchange, rawRequest, type RawResponse } from '../support/raw-http.js'
import { listen, type RunningServer } from '../support/servers.js'

const SECRET = 'svc_whsec_aHR0cC1lZGdlcy1oYXJkZW5pbmctc2VjcmV0'
const PATH = '/webhooks/svc'
/** Upper bound of every wait for one answer (10x the 500 ms body deadline). */
const BOUNDED_WAIT_MS = 5_000
/** The body deadline of the "timed" receivers. */
const BODY_TIMEOUT_MS = 500
/** A body deadline far beyond BOUNDED_WAIT_MS: an answer within the wait cannot come from the deadline. */
const PATIENT_BODY_TIMEOUT_MS = 60_000
/** Declared by the stalled senders (under the default 1 MiB limit); only STALLED_SENT_BYTES are sent. */
const STALLED_DECLARED_BYTES = 1_048_000
const STALLED_SENT_BYTES = 10
const OVERSIZE_BYTES = 2 * 1024 * 1024
/**
 * A body larger than what loopback socket buffers absorb (measured: 3 MiB fits, 4 MiB does not),
 * so a client that reads only after writing everything depends on the server reading (draining) it.
 */
const BLOCKING_CLIENT_BYTES = 8 * 1024 * 1024
const ATTEMPTS = 30

/** Receiver options, with the option being added by the rewrite (not yet in the type). */
type Options = WebhookReceiverOptions & { bodyTimeoutMs?: number }

interface ServerUnderTest {
  name: string
  /** Serves `options` on POST PATH. */
  start(options: Options): Promise<RunningServer>
}

/** The matrix: one describe per server, built from these factories. */
const SERVERS: ServerUnderTest[] = [
  {
    name: 'node:http createNodeHandler',
    start(options) {
      const handle = createNodeHandler(options)
      return listen((req: IncomingMessage, res: ServerResponse) => {
        if (req.url === PATH) return void handle(req, res)
        res.writeHead(404).end()
      })
    },
  },
  {
    name: 'express 5 webhooks()',
    start(options) {
      const app = express()
      app.post(PATH, expressWebhooks(options))
      return listen(app)
    },
  },
  {
    name: 'hono webhooks() on @hono/node-server',
    start(options) {
      const app = new Hono()
      app.post(PATH, honoWebhooks(options))
      return listen(getRequestListener(app.fetch))
    },
  },
  {
    name: 'fastify 5 webhooksPlugin',
    async start(options) {
      const app = Fastify()
      app.register(webhooksPlugin, { path: PATH, ...options })
      const url = await app.listen({ port: 0, host: '127.0.0.1' })
      return { url, close: () => app.close() }
    },
  },
]

/** A receiver whose handler records its runs by delivery id. */
function recorder(extra: Partial<Options> = {}) {
  const runs = new Map<string, number>()
  const options: Options = {
    secret: SECRET,
    on: {
      'message.received': async (_event, delivery) => {
        runs.set(delivery.id, (runs.get(delivery.id) ?? 0) + 1)
      },
    },
    ...extra,
  }
  return { runs, options }
}

type Receiver = ReturnType<typeof recorder> & { url: string; server?: RunningServer }

const delivery = () => signWebhook({ secret: SECRET, event: sampleEvent('message.received') })

/** POSTs a signed delivery with fetch, bounded. */
async function deliver(url: string, signed: SignedWebhook) {
  const res = await fetch(url + PATH, {
    method: 'POST',
    headers: signed.headers,
    body: signed.rawBody as BodyInit,
    signal: AbortSignal.timeout(BOUNDED_WAIT_MS),
  })
  const text = await res.text()
  return { status: res.status, json: text.startsWith('{') ? (JSON.parse(text) as unknown) : text }
}

/** The body the stalled senders declare; they send only its first STALLED_SENT_BYTES. */
const STALLED_BODY = Buffer.alloc(STALLED_DECLARED_BYTES, 0x61)

/** Headers signed over STALLED_BODY (so the signature would match once the whole body came). */
async function stalledHeaders(change: { timestamp?: number; schemes?: ('v2' | 'v1')[] } = {}) {
  return (await signWebhook({ secret: SECRET, body: STALLED_BODY, ...change })).headers
}

/** Sends the head declaring STALLED_DECLARED_BYTES and only STALLED_SENT_BYTES of body, then stalls. */
function sendStalled(url: string, headers: Record<string, string | undefined>): Promise<RawResponse> {
  const request = rawRequest({
    path: PATH,
    headers,
    body: STALLED_BODY.subarray(0, STALLED_SENT_BYTES),
    contentLength: STALLED_DECLARED_BYTES,
  })
  return rawExchange(url, { request, waitMs: BOUNDED_WAIT_MS })
}

const nowSeconds = () => Math.floor(Date.now() / 1000)
const wrongV2 = `v2=${'ab'.repeat(32)}`

/** What a stalled body must end in: 503 body_timeout with Retry-After, or a closed connection. */
function expectBodyDeadline(res: RawResponse): void {
  expect(res.outcome, 'the stalled request was neither answered nor closed within the bounded wait').not.toBe('timeout')
  expect(res.status, '408 is a permanent refusal for the sender').not.toBe(408)
  if (res.status === undefined) {
    expect(['closed', 'ECONNRESET', 'EPIPE']).toContain(res.outcome)
    return
  }
  expect({ status: res.status, json: res.json }).toEqual({ status: 503, json: { ok: false, code: 'body_timeout' } })
  expect(res.headers['retry-after'], 'a 503 body_timeout carries Retry-After').toMatch(/^\d+$/)
}

/** Runs `once` up to `times` times within `budgetMs`; attempts left when the budget is spent count as 'out of budget'. */
async function repeat(times: number, budgetMs: number, once: () => Promise<string>): Promise<Record<string, number>> {
  const deadline = Date.now() + budgetMs
  const tally: Record<string, number> = {}
  for (let i = 0; i < times; i++) {
    const outcome = Date.now() < deadline ? await once() : 'out of budget'
    tally[outcome] = (tally[outcome] ?? 0) + 1
  }
  return tally
}

/** `413 body_too_large` when the 413 answer was read, otherwise what happened instead. */
function describeRaw(res: RawResponse): string {
  if (res.status === undefined) return res.outcome
  return `${res.status} ${String(res.json?.code ?? res.outcome)}`
}

async function describeFetch(run: () => Promise<Response>): Promise<string> {
  try {
    const res = await run()
    const text = await res.text()
    const code = text.startsWith('{') ? String((JSON.parse(text) as { code?: unknown }).code) : text.slice(0, 40)
    return `${res.status} ${code}`
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    return cause?.code ?? cause?.message ?? (error as Error).name
  }
}

const REPEAT_BUDGET_MS = 20_000
const ATTEMPT_WAIT_MS = 3_000
const EXPECTED_413 = { '413 body_too_large': ATTEMPTS }

for (const target of SERVERS) {
  describe(target.name, () => {
    /** bodyTimeoutMs 500: the stalled-body tests. */
    const timed: Receiver = { ...recorder({ bodyTimeoutMs: BODY_TIMEOUT_MS }), url: '' }
    /** bodyTimeoutMs 60 s: an answer within the bounded wait came before (without) the body. */
    const patient: Receiver = { ...recorder({ bodyTimeoutMs: PATIENT_BODY_TIMEOUT_MS }), url: '' }
    /** Defaults (maxBodyBytes 1 MiB): content types and oversize bodies. */
    const plain: Receiver = { ...recorder(), url: '' }
    /** An async onResult that rejects. */
    let onResultCalls = 0
    const rejecting: Receiver = {
      ...recorder({
        onResult: async () => {
          onResultCalls++
          throw new Error('http-edges: onResult rejects on purpose')
        },
      }),
      url: '',
    }
    const receivers = [timed, patient, plain, rejecting]

    beforeAll(async () => {
      for (const receiver of receivers) {
        receiver.server = await target.start(receiver.options)
        receiver.url = receiver.server.url
      }
    })

    afterAll(async () => {
      destroyRawSockets()
      await Promise.all(receivers.map((receiver) => receiver.server?.close()))
    })

    describe('1. stalled bodies (bodyTimeoutMs)', () => {
      it('a) stale timestamp + 10 of 1048000 bytes, then a stall: 401 timestamp_too_old arrives without the body', async () => {
        const headers = await stalledHeaders({ timestamp: nowSeconds() - 3600 })
        const answers = await Promise.all([timed, patient].map((receiver) => sendStalled(receiver.url, headers)))
        // The patient receiver's body deadline (60 s) is far beyond the bounded wait: its answer can
        // only come from a check made before (without) reading the body.
        for (const res of answers) {
          expect({ outcome: res.outcome, status: res.status, json: res.json }).toEqual({
            outcome: 'answered',
            status: 401,
            json: { ok: false, code: 'timestamp_too_old' },
          })
        }
      })

      it('b) well-formed v2 signature that does not match + stall: 503 body_timeout (Retry-After) or closed; never 408, never a hang', async () => {
        const headers = { ...(await stalledHeaders({ schemes: ['v2'] })), 'svc-webhook-signature-v2': wrongV2 }
        expectBodyDeadline(await sendStalled(timed.url, headers))
      })

      const headerOnlyRefusals: { name: string; change: (h: Record<string, string>) => Record<string, string | undefined>; code?: string }[] = [
        { name: 'malformed signature header (v2=nothex)', change: (h) => ({ ...h, 'svc-webhook-signature-v2': 'v2=nothex', 'svc-webhook-signature': undefined }) },
        { name: 'missing svc-webhook-id', change: (h) => ({ ...h, 'svc-webhook-id': undefined }), code: 'missing_id' },
        { name: 'timestamp not decimal seconds', change: (h) => ({ ...h, 'svc-webhook-timestamp': 'yesterday' }), code: 'invalid_timestamp' },
        { name: 'timestamp an hour ahead', change: (h) => ({ ...h, 'svc-webhook-timestamp': String(nowSeconds() + 3600) }), code: 'timestamp_in_future' },
        { name: 'no signature header', change: (h) => ({ ...h, 'svc-webhook-signature-v2': undefined, 'svc-webhook-signature': undefined }), code: 'missing_signature' },
        { name: 'only the v1 signature (allowV1 off)', change: (h) => ({ ...h, 'svc-webhook-signature-v2': undefined }), code: 'v1_not_allowed' },
      ]

      it.each(headerOnlyRefusals)('c) $name + stall: refused 4xx before the body', async ({ change, code }) => {
        const headers = change(await stalledHeaders())
        const answers = await Promise.all([timed, patient].map((receiver) => sendStalled(receiver.url, headers)))
        for (const res of answers) {
          expect(res.outcome, 'refused within the bounded wait, without the body').toBe('answered')
          expect(res.status).toBeGreaterThanOrEqual(400)
          expect(res.status).toBeLessThan(500)
          expect(res.status).not.toBe(408)
          expect(res.json).toMatchObject({ ok: false, ...(code ? { code } : {}) })
        }
      })

      it('20 concurrent stalled connections with valid headers: each gets 503 body_timeout or is closed', async () => {
        const answers = await Promise.all(
          Array.from({ length: 20 }, async () => sendStalled(timed.url, await stalledHeaders())),
        )
        for (const res of answers) expectBodyDeadline(res)
        expect(timed.runs.size, 'no handler ran for a body that never came').toBe(0)
      })

      it('d) after the stalled requests, a signed delivery is answered 200 and its handler runs', async () => {
        for (const receiver of [timed, patient]) {
          const signed = await delivery()
          expect(await deliver(receiver.url, signed)).toEqual({ status: 200, json: { ok: true } })
          expect(receiver.runs.get(signed.id)).toBe(1)
        }
      })
    })

    describe('2. content types: the signature covers bytes, never the Content-Type', () => {
      const contentTypes: { name: string; value: string | undefined }[] = [
        { name: 'empty Content-Type header', value: '' },
        { name: "'application/json, text/plain'", value: 'application/json, text/plain' },
        { name: "'application'", value: 'application' },
        { name: "'text/plain'", value: 'text/plain' },
        { name: 'no Content-Type header', value: undefined },
      ]

      it.each(contentTypes)('$name: 200 and the handler ran', async ({ value }) => {
        const signed = await delivery()
        const headers = { ...signed.headers, 'content-type': value }
        const request = rawRequest({ path: PATH, headers, body: Buffer.from(signed.rawBody) })
        const res = await rawExchange(plain.url, { request, waitMs: BOUNDED_WAIT_MS })
        expect({ outcome: res.outcome, status: res.status, json: res.json }).toEqual({ outcome: 'answered', status: 200, json: { ok: true } })
        expect(plain.runs.get(signed.id)).toBe(1)
      })
    })

    describe('3. oversize bodies (maxBodyBytes 1 MiB): the 413 is always read, never a reset before it', () => {
      let oversize: SignedWebhook
      beforeAll(async () => {
        oversize = await signWebhook({ secret: SECRET, body: Buffer.alloc(OVERSIZE_BYTES, 0x61) })
      })

      it(`2 MiB with an honest Content-Length in ONE socket write, ${ATTEMPTS} times: 413 body_too_large every time`, async () => {
        const request = rawRequest({ path: PATH, headers: oversize.headers, body: Buffer.from(oversize.rawBody) })
        const tally = await repeat(ATTEMPTS, REPEAT_BUDGET_MS, async () =>
          describeRaw(await rawExchange(plain.url, { request, waitMs: ATTEMPT_WAIT_MS })),
        )
        expect(tally).toEqual(EXPECTED_413)
      })

      it(`2 MiB with an honest Content-Length sent by fetch, ${ATTEMPTS} times: 413 body_too_large every time`, async () => {
        const tally = await repeat(ATTEMPTS, REPEAT_BUDGET_MS, () =>
          describeFetch(() =>
            fetch(plain.url + PATH, {
              method: 'POST',
              headers: oversize.headers,
              body: oversize.rawBody as BodyInit,
              signal: AbortSignal.timeout(ATTEMPT_WAIT_MS),
            }),
          ),
        )
        expect(tally).toEqual(EXPECTED_413)
      })

      it(`2 MiB chunked (no Content-Length) in ONE socket write, ${ATTEMPTS} times: 413 body_too_large every time`, async () => {
        const request = rawRequest({ path: PATH, headers: oversize.headers, body: Buffer.from(oversize.rawBody), chunked: true })
        const tally = await repeat(ATTEMPTS, REPEAT_BUDGET_MS, async () =>
          describeRaw(await rawExchange(plain.url, { request, waitMs: ATTEMPT_WAIT_MS })),
        )
        expect(tally).toEqual(EXPECTED_413)
      })

      it('2 MiB chunked streamed by fetch (16 KiB chunks), 10 times: 413 body_too_large every time', async () => {
        const chunk = new Uint8Array(16 * 1024).fill(0x61)
        const tally = await repeat(10, REPEAT_BUDGET_MS, () =>
          describeFetch(() => {
            let sent = 0
            const body = new ReadableStream<Uint8Array>({
              pull(controller) {
                if (sent >= OVERSIZE_BYTES) return controller.close()
                sent += chunk.byteLength
                controller.enqueue(chunk)
              },
            })
            return fetch(plain.url + PATH, {
              method: 'POST',
              headers: oversize.headers,
              body,
              duplex: 'half',
              signal: AbortSignal.timeout(ATTEMPT_WAIT_MS),
            } as RequestInit)
          }),
        )
        expect(tally).toEqual({ '413 body_too_large': 10 })
      })

      it('a blocking client (reads only once its whole 8 MiB request is written), 10 times: 413 every time', async () => {
        // Past what the socket buffers absorb, the client's write completes only if the server reads
        // (drains) the body; a server that closes with it unread resets the connection: EPIPE/ECONNRESET.
        const big = await signWebhook({ secret: SECRET, body: Buffer.alloc(BLOCKING_CLIENT_BYTES, 0x61) })
        const request = rawRequest({ path: PATH, headers: big.headers, body: Buffer.from(big.rawBody) })
        const tally = await repeat(10, REPEAT_BUDGET_MS, async () =>
          describeRaw(await rawExchange(plain.url, { request, waitMs: ATTEMPT_WAIT_MS, readAfterWrite: true })),
        )
        expect(tally).toEqual({ '413 body_too_large': 10 })
      })

      it('after the oversize bodies, a signed delivery is answered 200 and its handler runs', async () => {
        const signed = await delivery()
        expect(await deliver(plain.url, signed)).toEqual({ status: 200, json: { ok: true } })
        expect(plain.runs.get(signed.id)).toBe(1)
      })
    })

    describe('4. an async onResult that rejects', () => {
      it('does not reach unhandledRejection (which kills a Node process by default); both deliveries are answered 200', async () => {
        // Node's default --unhandled-rejections=throw turns an 'unhandledRejection' with no listener
        // into an uncaught exception: seeing the event here is the crash in production.
        const rejections: unknown[] = []
        const onRejection = (reason: unknown) => void rejections.push(reason)
        process.on('unhandledRejection', onRejection)
        const answers = []
        const ids: string[] = []
        try {
          for (let i = 0; i < 2; i++) {
            const signed = await delivery()
            ids.push(signed.id)
            answers.push(await deliver(rejecting.url, signed))
          }
          // Unhandled rejections are reported after the microtask queue drains: give it a few turns.
          await new Promise((resolve) => setTimeout(resolve, 100))
          await new Promise((resolve) => setImmediate(resolve))
        } finally {
          process.off('unhandledRejection', onRejection)
        }
        expect(answers).toEqual([
          { status: 200, json: { ok: true } },
          { status: 200, json: { ok: true } },
        ])
        expect(ids.map((id) => rejecting.runs.get(id))).toEqual([1, 1])
        expect(onResultCalls, 'onResult was called once per delivery').toBe(2)
        expect(rejections.map((reason) => String((reason as Error)?.message ?? reason))).toEqual([])
      })
    })
  })
}
