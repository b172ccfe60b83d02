/**
 * Under OpenTelemetry's HTTP instrumentation in a real node:http server (its own process, set up
 * as a production app does), the receive span is the child of the HTTP server span, in its trace.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_InstrumentedHttpSecretQ2hhbmdlTWU'
const script = fileURLToPath(new URL('../apps/otel/http-server.cjs', import.meta.url))

interface SpanRecord {
  name: string
  traceId: string
  spanId: string
  parentSpanId?: string
  attributes: Record<string, unknown>
}

describe('receive span under the HTTP instrumentation (node:http, real server)', () => {
  let child: ChildProcess
  let url: string
  beforeAll(async () => {
    child = spawn(process.execPath, [script], { env: { ...process.env, SECRET }, stdio: ['ignore', 'pipe', 'pipe'] })
    const [chunk] = (await once(child.stdout!, 'data')) as [Buffer]
    url = `http://127.0.0.1:${chunk.toString().trim()}`
  })
  afterAll(() => {
    child?.kill()
  })

  it('is the child of the HTTP server span, in its trace', async () => {
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
    const res = await fetch(`${url}/webhooks/svc`, { method: 'POST', headers: signed.headers, body: signed.rawBody as BodyInit })
    expect(res.status).toBe(200)
    const spans = (await (await fetch(`${url}/spans`)).json()) as SpanRecord[]
    const receive = spans.find((span) => span.name === 'receive default')
    const server = spans.find((span) => span.attributes['http.method'] === 'POST' || span.attributes['http.request.method'] === 'POST')
    expect(receive, JSON.stringify(spans.map((s) => s.name))).toBeDefined()
    expect(server).toBeDefined()
    expect(receive!.parentSpanId).toBe(server!.spanId)
    expect(receive!.traceId).toBe(server!.traceId)
    expect(receive!.attributes['messaging.message.id']).toBe(signed.id)
  })
})
