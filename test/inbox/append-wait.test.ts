/**
 * The receiver's append to an inbox that is away for a moment: tried again inside the request
 * (`inboxWaitMs`), so a restart of the inbox's server costs latency, not 503s the sender counts
 * toward disabling the endpoint. A refusal is answered at once; past the wait it is 503. Over an
 * inbox that fails on purpose, then over a real Postgres restarted while a delivery is in flight.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, it, describe } from 'vitest'
import { createWebhookReceiver, InboxError, MemoryInbox, type InboxDelivery, type WebhookInboxProducer } from 'svc-webhooks'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { signWebhook, sampleEvent } from 'svc-webhooks/testing'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'

const SECRET = 'svc_whsec_AppendWaitTestSecret'

/** An inbox whose first `failures` appends reject with an InboxError of `kind`. */
function flaky(failures: number, kind: 'unavailable' | 'refused' = 'unavailable') {
  const inner = new MemoryInbox()
  const inbox = {
    calls: 0,
    async append(delivery: InboxDelivery) {
      inbox.calls++
      if (inbox.calls <= failures) throw new InboxError(kind, 'FlakyInbox.append', `FlakyInbox.append: ${kind}`)
      return inner.append(delivery)
    },
  }
  return inbox
}

async function post(inbox: WebhookInboxProducer, inboxWaitMs?: number) {
  const receiver = createWebhookReceiver({ secret: SECRET, inbox, log: false, ...(inboxWaitMs === undefined ? {} : { inboxWaitMs }) })
  const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received') })
  const started = Date.now()
  const answer = await receiver.handle({ method: 'POST', body: signed.body, headers: signed.headers })
  return { status: answer.status, code: (JSON.parse(answer.body) as { code?: string }).code, ms: Date.now() - started }
}

describe('appending to an inbox that is away for a moment', () => {
  it('unavailable for three tries, then back: 202 accepted, not 503', async () => {
    const inbox = flaky(3)
    expect(await post(inbox)).toMatchObject({ status: 202 })
    expect(inbox.calls).toBe(4)
  })

  it('a refusal (it will keep refusing) is answered 503 at once, tried once', async () => {
    const inbox = flaky(100, 'refused')
    expect(await post(inbox)).toMatchObject({ status: 503, code: 'inbox_unavailable' })
    expect(inbox.calls).toBe(1)
  })

  it('still away after inboxWaitMs: 503 inbox_unavailable, after trying more than once', async () => {
    const inbox = flaky(100)
    const answer = await post(inbox, 400)
    expect(answer).toMatchObject({ status: 503, code: 'inbox_unavailable' })
    // It waited between tries (100 then 200 ms; the next, 400, would pass the wait) before the
    // 503: about 300 ms, read on the wall clock, which may count a timer's wait a millisecond short.
    expect(answer.ms).toBeGreaterThanOrEqual(290)
    expect(inbox.calls).toBeGreaterThan(1)
  })

  it('inboxWaitMs: 0 answers 503 at the first failure; out of range is a startup error', async () => {
    const inbox = flaky(1)
    expect(await post(inbox, 0)).toMatchObject({ status: 503 })
    expect(inbox.calls).toBe(1)
    expect(() => createWebhookReceiver({ secret: SECRET, inbox, inboxWaitMs: 20_000 })).toThrow(/inboxWaitMs/)
  })
})

describeWithPostgres('PostgresInbox restarted while a delivery is being appended', () => {
  let server: PostgresServer
  let pool: pg.Pool
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 4, connectionTimeoutMillis: 1000 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  it('the database is down for about 1.5 s when the delivery arrives: answered 202 once it is back, and the delivery is in the inbox', { timeout: 60_000 }, async () => {
    const inbox = new PostgresInbox({ pool, table: 'append_wait_inbox', timeoutMs: 1000 })
    await inbox.ensureTable()
    await server.kill()
    const back = new Promise((done) => setTimeout(done, 1500)).then(() => server.start())
    const answer = await post(inbox, 8000)
    await back
    expect(answer).toMatchObject({ status: 202 })
    expect((await inbox.stats()).depth).toBe(1)
  })
})
