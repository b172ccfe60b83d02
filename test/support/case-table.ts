/**
 * One case table, every adapter: the rows (case-rows.ts) are data, the targets are transports
 * (transports.ts), and `describeCaseTable` runs every row, unchanged, through one transport to a
 * case app (case-app.ts, CASE_APP contract): its single-endpoint route, and its multi-tenant
 * route for the rows that name a tenant. Each answer is checked against its row of the core's
 * answers table (`ANSWERS`): status, JSON body, `Retry-After` present exactly when the row says
 * so, the row's extra headers; then the handler's record of runs (in total, and by tenant) is
 * read back through the transport.
 */
import { isDeepStrictEqual } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ANSWERS, type AnswerName, type AnswerRow } from 'svc-webhooks'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { CASE_ROWS, type CaseCapability, type CaseRow, type CaseSend } from './case-rows.js'
import { CASE_SECRET } from './case-table-constants.js'
import type { CaseRequest, CaseResponse, CaseTransport } from './transports.js'

export { CASE_ROWS, TENANT_ROWS, VARIANT_ROWS, type CaseCapability, type CaseRow, type CaseSend } from './case-rows.js'
export * from './case-table-constants.js'
export * from './transports.js'

const encoder = new TextEncoder()

/** The test's name, from the row: what is sent, the answers, the runs. */
function title(row: CaseRow): string {
  const answers = row.sends.map((send) => {
    const route = send.tenant ?? send.variant
    const first = `${route === undefined ? '' : `${route}: `}${ANSWERS[send.answer].status} ${send.answer}`
    if (send.copies === undefined) return first
    const others = (send.others ?? []).map((name) => `${ANSWERS[name].status} ${name}`).join(' or ')
    return `one ${first}${others ? `, the rest ${others}` : ''}`
  })
  const byTenant = Object.entries(row.tenantRuns ?? {}).map(([tenant, n]) => `${tenant} ${n}`)
  const runs =
    (row.runs === undefined ? '' : row.runs === 0 ? ', handler not run' : `, handler runs ${row.runs === 1 ? 'once' : `${row.runs} times`}`) +
    (byTenant.length === 0 ? '' : ` (${byTenant.join(', ')})`)
  return `${row.name} -> ${answers.join(', then ')}${runs}`
}

/** The row's delivery, signed `later` seconds after `first` (same id and body) when given, with `secret` when given. */
function sign(row: CaseRow, first?: SignedWebhook, later = 0, secret?: string): Promise<SignedWebhook> {
  const d = row.delivery!
  let event = d.event
  if (d.text !== undefined) {
    const message = sampleEvent('message.received')
    message.message.text = d.text
    event = message
  }
  const timestamp = first ? first.timestamp + later : Math.floor(Date.now() / 1000) - (d.ageSeconds ?? 0)
  return signWebhook({
    secret: secret ?? d.secret ?? CASE_SECRET,
    ...(d.body === undefined ? { event } : { body: d.body }),
    ...(d.schemes ? { schemes: d.schemes } : {}),
    ...(first ? { id: first.id } : {}),
    timestamp,
  })
}

function request(send: CaseSend, signed: SignedWebhook | undefined): CaseRequest {
  const route = { ...(send.tenant === undefined ? {} : { tenant: send.tenant }), ...(send.variant === undefined ? {} : { variant: send.variant }) }
  if (send.method !== undefined && send.method !== 'POST') return { method: send.method, headers: {}, body: null, ...route }
  if (signed === undefined) throw new Error('a POST row needs a delivery')
  let body = send.tamper ? encoder.encode(signed.body.replace(send.tamper[0], send.tamper[1])) : signed.rawBody
  const headers: Record<string, string> = { ...signed.headers, ...send.headers }
  for (const name of send.omit ?? []) delete headers[name]
  if (send.stall) {
    // No declared length: the receiver cannot know the body is short, only that it stopped arriving.
    body = body.subarray(0, body.byteLength >> 1)
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'content-length') delete headers[name]
    return { method: 'POST', headers, body, stall: true, ...route }
  }
  return { method: 'POST', headers, body, ...route }
}

function json(response: CaseResponse): unknown {
  try {
    return JSON.parse(response.body)
  } catch {
    return response.body
  }
}

/** Whether `response` is the answer `name`: its status and JSON body. */
const is = (response: CaseResponse, name: AnswerName) =>
  response.status === ANSWERS[name].status && isDeepStrictEqual(json(response), ANSWERS[name].body)

/** Checks `response` against the row `name` of the answers table. */
function expectAnswer(response: CaseResponse, name: AnswerName): void {
  const row: AnswerRow = ANSWERS[name]
  expect({ status: response.status, body: json(response) }, name).toEqual({ status: row.status, body: row.body })
  if (row.retryAfter) expect(Number(response.headers['retry-after']), `${name}: Retry-After`).toBeGreaterThan(0)
  else expect(response.headers['retry-after'], `${name}: no Retry-After`).toBeUndefined()
  for (const [header, value] of Object.entries(row.headers ?? {})) expect(response.headers[header], header).toBe(value)
}

/**
 * Sends a row's requests through `transport` and checks every answer and the handler's runs.
 *
 * @example
 * await runRow(receiverTransport(createWebhookReceiver(app.options), app), CASE_ROWS[0]!)
 */
export async function runRow(transport: CaseTransport, row: CaseRow): Promise<void> {
  const first = row.delivery ? await sign(row) : undefined
  const scopesBefore = (await transport.record()).scopes?.length ?? 0
  const statuses: number[] = []
  for (const send of row.sends) {
    if (send.copies === undefined) {
      const signed = send.later === undefined && send.secret === undefined ? first : await sign(row, first, send.later, send.secret)
      const response = await transport.send(request(send, signed))
      statuses.push(response.status)
      expectAnswer(response, send.answer)
      continue
    }
    // Each copy signed afresh, up to two seconds apart: concurrent resends are not byte-identical.
    const copies = await Promise.all(Array.from({ length: send.copies }, (_, i) => sign(row, first, (send.later ?? 0) + (i % 3), send.secret)))
    const responses = await Promise.all(copies.map((signed) => transport.send(request(send, signed))))
    statuses.push(...responses.map((response) => response.status))
    const names = [send.answer, ...(send.others ?? [])]
    const got = responses.map((response) => names.find((name) => is(response, name)))
    const seen = responses.map((response) => `${response.status} ${response.body}`)
    expect(got, `every copy gets one of ${names.join(', ')}: ${seen.join(' | ')}`).not.toContain(undefined)
    expect(got.filter((name) => name === send.answer), `exactly one ${send.answer}: ${seen.join(' | ')}`).toHaveLength(1)
    responses.forEach((response, i) => expectAnswer(response, got[i]!))
  }
  const record = await transport.record()
  // Every request reported one ended receive scope to `telemetry`, with the status it was answered.
  const scopes = (record.scopes ?? []).slice(scopesBefore)
  expect([...scopes].sort(), 'telemetry: one receive scope per request, with its status').toEqual([...statuses].sort())
  if (row.runs !== undefined) expect(record.runs[first!.id] ?? 0, 'handler runs').toBe(row.runs)
  if (row.tenantRuns !== undefined) {
    const byTenant = Object.fromEntries(Object.keys(record.endpoints ?? {}).flatMap((tenant) => {
      const n = record.endpoints[tenant]![first!.id]
      return n === undefined ? [] : [[tenant, n]]
    }))
    expect(byTenant, 'handler runs by tenant (endpoint)').toEqual(row.tenantRuns)
  }
}

export interface CaseTableOptions {
  /** Per row. @default 30000 */
  timeoutMs?: number
  /** For `connect`, e.g. a build and a server start. @default 180000 */
  connectTimeoutMs?: number
  /**
   * What this target cannot do, and why: the rows that need it are listed as not applying (a
   * skipped test whose name gives the reason). Known before `connect`, as test names are.
   */
  lacks?: Partial<Record<CaseCapability, string>>
}

/**
 * Runs every row of the case table through the transport `connect` resolves to (called once, in
 * `beforeAll`; the transport's `close` runs in `afterAll`).
 *
 * @example
 * describeCaseTable('express 5', async () => httpTransport(await listen(app)))
 * describeCaseTable('core, in process', async () => receiverTransport(createWebhookReceiver(app.options), app))
 */
export function describeCaseTable(name: string, connect: () => Promise<CaseTransport>, options: CaseTableOptions = {}): void {
  const { timeoutMs = 30_000, connectTimeoutMs = 180_000, lacks = {} } = options
  describe(`case table: ${name}`, () => {
    let transport: CaseTransport | undefined
    beforeAll(async () => {
      transport = await connect()
    }, connectTimeoutMs)
    afterAll(async () => {
      await transport?.close?.()
    })
    for (const row of CASE_ROWS) {
      const lacking = (row.needs ?? []).filter((need) => lacks[need] !== undefined)
      // Declared, not silent: the row is listed as skipped, with why it does not apply here.
      if (lacking.length > 0) it.skip(`${title(row)} [does not apply: ${lacking.map((need) => lacks[need]).join('; ')}]`, () => undefined)
      else it(title(row), () => runRow(transport!, row), timeoutMs)
    }
  })
}
