/**
 * Receivers for the CLI tests, real node:http servers on 127.0.0.1: a correct one built on the
 * installed package, and deliberately broken ones, each with the bug a real integration has
 * (the doctor must catch every one). Each exposes GET /runs -> {"runs": {"<id>": finished runs}};
 * any other path is a 404 HTML page, as Express answers it. Multi-tenant receivers (one receiver,
 * many endpoints: `startTenantReceiver`) serve /tenants/:tenant/webhooks, a correct one and one
 * that accepts any tenant's signature at every tenant's URL.
 * Also `runCli`: the built bin as a child process, as users run it.
 */
import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import express from 'express'
import { createWebhookReceiver, MemoryStore, verifyWebhook, type WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { createNodeHandler } from 'svc-webhooks/node'

export const SECRET = 'svc_whsec_Y2xpLXRlc3RzLXNlY3JldC1kby1ub3QtdXNl'
/** The secret of the 'other-secret' receiver: another endpoint's, or a stale deploy's. */
const OTHER_SECRET = 'svc_whsec_YW5vdGhlci1lbmRwb2ludHMtc2VjcmV0LWRvLW5vdC11c2U'

export type ReceiverKind =
  | 'correct'
  /** Dedupes, but answers 409 to a duplicate: permanent to the sender. */
  | 'conflict-on-duplicate'
  /** Verifies JSON.stringify(JSON.parse(body)) instead of the raw bytes. */
  | 'reserializes-body'
  /** Checks the signature but trusts any timestamp. */
  | 'ignores-timestamp'
  /** No verification at all. */
  | 'accepts-anything'
  /** Verifies, answers 200, and runs the handler afterwards (when the next delivery arrives). */
  | 'answers-before-processing'
  /** Verifies, but runs the handler on every copy of a delivery (no dedupe). */
  | 'runs-duplicates'
  /** Verifies, but answers 400 to an event type it has no handler for. */
  | 'rejects-unknown-events'
  /** Express with express.json() mounted before webhooks(): every delivery is answered 500 body_already_parsed. */
  | 'parses-json-first'
  /** Correct, but configured with another secret than the one the CLI signs with: every delivery is refused 401. */
  | 'other-secret'
  /** Correct, but its `on` key is misspelled ('message.recieved'): every delivery is answered 200 ignored. */
  | 'misspelled-on'

export interface Receiver {
  url: string
  runsUrl: string
  close: () => Promise<void>
  /** The lines the receiver logged (receivers built on createWebhookReceiver), captured instead of printed. */
  logged: string[]
}

async function readBody(req: IncomingMessage): Promise<Uint8Array> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return new Uint8Array(Buffer.concat(chunks))
}

function send(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

/**
 * Starts one receiver on 127.0.0.1 (a free port); its webhook route is /webhooks/svc.
 *
 * @example
 * const receiver = await startReceiver('conflict-on-duplicate')
 * await runCli(['doctor', receiver.url, '--runs-url', receiver.runsUrl])
 */
export async function startReceiver(kind: ReceiverKind): Promise<Receiver> {
  if (kind === 'parses-json-first') return startParsesJsonFirst()
  const runs: Record<string, number> = {}
  const pending: string[] = []
  const record = (id: string) => {
    runs[id] = (runs[id] ?? 0) + 1
  }
  const on: WebhookHandlers = { 'message.received': (_event, delivery) => record(delivery.id) }
  const store = new MemoryStore()
  const logged: string[] = []
  const log = (line: string) => void logged.push(line)
  const receiver =
    kind === 'other-secret'
      ? createWebhookReceiver({ secret: OTHER_SECRET, on, store, log })
      : kind === 'misspelled-on'
        ? // The typo users make; the cast stands in for a JavaScript receiver (TypeScript refuses the key).
          createWebhookReceiver({ secret: SECRET, on: { 'message.recieved': on['message.received'] } as WebhookHandlers, store, log })
        : createWebhookReceiver({ secret: SECRET, on, store, log })
  const seen = new Set<string>()

  async function webhook(req: IncomingMessage, res: ServerResponse, body: Uint8Array): Promise<void> {
    const headers = req.headers
    for (const id of pending.splice(0)) record(id)
    switch (kind) {
      case 'other-secret':
      case 'misspelled-on':
      case 'correct': {
        const answer = await receiver.handle({ method: req.method, body, headers })
        res.writeHead(answer.status, answer.headers).end(answer.body)
        return
      }
      case 'reserializes-body': {
        let text: string
        try {
          text = JSON.stringify(JSON.parse(new TextDecoder().decode(body)))
        } catch {
          return send(res, 400, { ok: false })
        }
        const answer = await receiver.handle({ method: req.method, body: text, headers })
        res.writeHead(answer.status, answer.headers).end(answer.body)
        return
      }
      case 'ignores-timestamp': {
        // The bug: "now" is whatever the request says it is.
        const signedAt = Number(headers['svc-webhook-timestamp']) * 1000
        const lax = createWebhookReceiver({ secret: SECRET, on, store, now: () => signedAt, log })
        const answer = await lax.handle({ method: req.method, body, headers })
        res.writeHead(answer.status, answer.headers).end(answer.body)
        return
      }
      case 'accepts-anything': {
        record(String(headers['svc-webhook-id']))
        return send(res, 200, { ok: true })
      }
      default:
    }
    let delivery
    try {
      delivery = await verifyWebhook({ body, headers }, { secret: SECRET })
    } catch (error) {
      return send(res, (error as { status?: number }).status ?? 500, { ok: false })
    }
    if (delivery.event.event !== 'message.received') return send(res, kind === 'rejects-unknown-events' ? 400 : 200, { ok: kind !== 'rejects-unknown-events' })
    if (kind === 'runs-duplicates') {
      await new Promise((done) => setTimeout(done, 20)) // some work, so concurrent copies overlap
      record(delivery.id)
      return send(res, 200, { ok: true })
    }
    if (seen.has(delivery.id)) return send(res, kind === 'conflict-on-duplicate' ? 409 : 200, { ok: kind !== 'conflict-on-duplicate', duplicate: true })
    seen.add(delivery.id)
    if (kind === 'answers-before-processing') {
      // The bug: queue the work and answer at once. The work runs when the next delivery comes
      // in (not on a timer, so the test does not race the clock).
      pending.push(delivery.id)
      return send(res, 200, { ok: true })
    }
    record(delivery.id)
    send(res, 200, { ok: true })
  }

  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/runs') return send(res, 200, { runs })
    if (req.url !== '/webhooks/svc') {
      return res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end(`<!DOCTYPE html>\n<html lang="en">\n<body>\n<pre>Cannot ${req.method} ${req.url}</pre>\n</body>\n</html>\n`)
    }
    readBody(req)
      .then((body) => webhook(req, res, body))
      .catch(() => send(res, 500, { ok: false }))
  })
  return { ...(await listen(server)), logged }
}

/** The mounting bug of many first integrations: a JSON body parser for the whole app, above the webhook route. */
async function startParsesJsonFirst(): Promise<Receiver> {
  const runs: Record<string, number> = {}
  const logged: string[] = []
  const app = express()
  app.use(express.json())
  const on: WebhookHandlers = { 'message.received': (_event, delivery) => void (runs[delivery.id] = (runs[delivery.id] ?? 0) + 1) }
  app.post('/webhooks/svc', webhooks({ secret: SECRET, on, log: (line) => void logged.push(line) }))
  app.get('/runs', (_req, res) => void res.json({ runs }))
  return { ...(await listen(createServer(app))), logged }
}

/** The tenants of the multi-tenant receivers: acme has one secret, globex two (a rotation). */
export const TENANTS = {
  acme: 'svc_whsec_YWNtZS1jbGktdGVuYW50LXNlY3JldC1kby1ub3QtdXNl',
  globex: ['svc_whsec_Z2xvYmV4LWNsaS1uZXctc2VjcmV0LWRvLW5vdC11c2U', 'svc_whsec_Z2xvYmV4LWNsaS1vbGQtc2VjcmV0LWRvLW5vdC11c2U'],
} as const

export type TenantReceiverKind =
  /** `secret` and `endpoint` functions of the request's tenant (its path): each tenant's own secrets only. */
  | 'multi-tenant'
  /** The bug: the lookup returns every tenant's secrets, so any tenant's signature passes at any tenant's URL. */
  | 'accepts-other-tenants'

export interface TenantReceiver {
  /** The webhook URL of `tenant`: /tenants/<tenant>/webhooks (the tenant 'broken' has a lookup that throws). */
  url: (tenant: string) => string
  runsUrl: string
  close: () => Promise<void>
}

/**
 * Starts a receiver of many endpoints on 127.0.0.1 with svc-webhooks/node: the tenant is read
 * from the path, the tenant 'broken' has a secrets store that is down, any other unknown tenant has
 * no secret (404 unknown_endpoint).
 *
 * @example
 * const receiver = await startTenantReceiver('multi-tenant')
 * await runCli(['doctor', receiver.url('acme'), '--other-secret-env', 'GLOBEX'], { env: { SVC_WEBHOOK_SECRET: TENANTS.acme, GLOBEX: TENANTS.globex[0] } })
 */
export async function startTenantReceiver(kind: TenantReceiverKind): Promise<TenantReceiver> {
  const runs: Record<string, number> = {}
  const tenantOf = (req: IncomingMessage) => /^\/tenants\/([^/?]+)\/webhooks(?:\?|$)/.exec(req.url ?? '')?.[1]
  const secrets = new Map<string, string | readonly string[]>(Object.entries(TENANTS))
  const handle = createNodeHandler({
    secret: async (req) => {
      const tenant = tenantOf(req)
      await Promise.resolve() // a secrets store is an await away
      if (tenant === 'broken') throw new Error('the secrets store is unreachable')
      if (tenant === undefined || !secrets.has(tenant)) return undefined
      return kind === 'accepts-other-tenants' ? [...secrets.values()].flat() : secrets.get(tenant)
    },
    endpoint: (req) => tenantOf(req) ?? '',
    on: { 'message.received': (_event, delivery) => void (runs[delivery.id] = (runs[delivery.id] ?? 0) + 1) },
  })
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/runs') return send(res, 200, { runs })
    if (tenantOf(req) !== undefined) return void handle(req, res)
    res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end(`<!DOCTYPE html>\n<html lang="en">\n<body>\n<pre>Cannot ${req.method} ${req.url}</pre>\n</body>\n</html>\n`)
  })
  const { url, runsUrl, close } = await listen(server)
  const base = url.slice(0, -'/webhooks/svc'.length)
  return { url: (tenant) => `${base}/tenants/${tenant}/webhooks`, runsUrl, close }
}

async function listen(server: Server): Promise<Omit<Receiver, 'logged'>> {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: `${base}/webhooks/svc`,
    runsUrl: `${base}/runs`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((done) => server.close(() => done()))
    },
  }
}

export const CLI = resolve(import.meta.dirname, '../../dist/cli.js')

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs `node dist/cli.js ...args` as a child process (asynchronously, so receivers in this
 * process keep serving). The secret comes from SVC_WEBHOOK_SECRET unless `env` says otherwise.
 *
 * @example
 * const { code, stdout } = await runCli(['send', receiver.url])
 */
export function runCli(args: string[], options: { env?: Record<string, string | undefined>; input?: string | Uint8Array } = {}): Promise<CliResult> {
  const env: Record<string, string | undefined> = { PATH: process.env.PATH, SVC_WEBHOOK_SECRET: SECRET, ...options.env }
  return new Promise((done) => {
    const child = execFile(process.execPath, [CLI, ...args], { env: env as NodeJS.ProcessEnv, timeout: 60_000, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0
      done({ code, stdout, stderr })
    })
    if (options.input !== undefined) child.stdin!.end(options.input)
    else child.stdin!.end()
  })
}
