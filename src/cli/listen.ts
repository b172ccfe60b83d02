/**
 * `svc-webhooks listen --url https://... [--forward-to http://127.0.0.1:...]`: real deliveries on
 * a laptop. The service delivers only to a public https URL (spec/service-api.md §2.1), so the
 * user brings a tunnel; this registers a temporary endpoint for its URL (§4.1), writes the
 * endpoint's secret to a file the local receiver reads (`FileSecretSource`), shows each delivery
 * as it arrives when it forwards them, and deletes the endpoint on every way out: Ctrl-C,
 * SIGTERM, `--timeout`, or a crash (and what a SIGKILL left, at the next start). The token is read from $SVC_API_TOKEN only and never printed.
 */
import { randomUUID } from 'node:crypto'
import { rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { resolve } from 'node:path'
import { isLoopback } from '../service/client.js'
import type { ServiceClient } from '../service/types.js'
import { defineCommand, EXIT, httpUrl, integer, UsageError, type Io } from './command.js'
import { serviceClient, writeSecretFile } from './endpoints.js'

const DEFAULT_SECRET_FILE = '.svc-webhooks-secret'
const DEFAULT_TIMEOUT_S = 3600
/** The label every endpoint `listen` registers starts with: how a later run finds a leftover. */
const LABEL_PREFIX = 'svc-webhooks listen '
/** The sender's own limit (§6.3): a forwarded delivery waits no longer for the local receiver. */
const FORWARD_TIMEOUT_MS = 10_000
/** A forwarded body larger than this is refused: the receiver's default maxBodyBytes. */
const MAX_FORWARD_BYTES = 1024 * 1024


/** The client for $SVC_API_URL, $SVC_API_TOKEN and $SVC_BUSINESS_ID; a missing one is a usage error. */
function serviceFromEnv(io: Io): ServiceClient {
  const { SVC_API_URL: baseUrl, SVC_API_TOKEN: token, SVC_BUSINESS_ID: businessId } = io.env
  if (!baseUrl) throw new UsageError("no service URL: set SVC_API_URL to the service's base URL.")
  httpUrl(baseUrl, '$SVC_API_URL')
  if (!token) throw new UsageError('no token: set SVC_API_TOKEN to a personal access token (svc_pat_...). It is read from the environment only.')
  if (!businessId) throw new UsageError('no business: set SVC_BUSINESS_ID to the business UUID.')
  return serviceClient({ baseUrl, token, businessId })
}


async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_FORWARD_BYTES) return undefined
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

/** A proxy on 127.0.0.1:port that prints each delivery and hands it, byte for byte, to `target`. */
function forwarder(port: number, target: URL, io: Io) {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const started = Date.now()
      const id = String(req.headers['svc-webhook-id'] ?? '(no id)').slice(0, 80)
      const event = String(req.headers['svc-webhook-event'] ?? '(no event)').slice(0, 80)
      const body = await readBody(req)
      if (body === undefined) {
        res.writeHead(413).end()
        io.out(`${new Date().toISOString()}  ${id}  ${event}  413: over ${MAX_FORWARD_BYTES} bytes, not forwarded\n`)
        return
      }
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined && !['host', 'connection', 'content-length', 'transfer-encoding'].includes(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value
      }
      try {
        const answer = await fetch(target, {
          method: req.method ?? 'POST',
          headers,
          body: req.method === 'GET' || req.method === 'HEAD' ? undefined : new Uint8Array(body),
          signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
        })
        const text = await answer.text()
        // Printed before the answer goes back, so the line never trails the sender's view.
        io.out(`${new Date().toISOString()}  ${id}  ${event}  ${answer.status} in ${Date.now() - started} ms  ${text.slice(0, 120)}\n`)
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain', ...(answer.headers.get('retry-after') ? { 'retry-after': answer.headers.get('retry-after')! } : {}) })
        res.end(text)
      } catch (error) {
        // No answer from the local receiver: 502, which the sender retries.
        res.writeHead(502).end()
        io.out(`${new Date().toISOString()}  ${id}  ${event}  502: ${target.href} did not answer (${(error as Error).name}); the sender will retry\n`)
      }
    })()
  })
  return {
    start: () => new Promise<void>((done, fail) => server.once('error', fail).listen(port, '127.0.0.1', () => done())),
    stop: () => new Promise<void>((done) => server.close(() => done())),
  }
}

export const listen = defineCommand(
  {
    name: 'listen',
    summary: 'register a temporary endpoint for your tunnel and show real deliveries',
    usage: ['--url <public https URL> [--forward-to <local URL> --port <N>] [options]'],
    description: `Registers a temporary webhook endpoint for the public URL of your tunnel (the service
delivers only to https on 443), writes its signing secret to a file your receiver reads with
FileSecretSource (default ${DEFAULT_SECRET_FILE}, mode 0600), and deletes the endpoint when
it stops: Ctrl-C, SIGTERM, --timeout, or an error; one a killed listen (SIGKILL) left for
the same URL is deleted when the next listen starts. With --forward-to it also listens on
127.0.0.1:--port (point the tunnel there), prints each delivery as it arrives and forwards it
to your receiver unchanged, answering with your receiver's answer.
The service is found from $SVC_API_URL, $SVC_API_TOKEN (never printed) and $SVC_BUSINESS_ID.`,
    flags: {
      url: { type: 'string', value: 'URL', help: 'the public https URL the service delivers to (your tunnel)' },
      'forward-to': { type: 'string', value: 'URL', help: 'your local receiver: each delivery is printed and forwarded to it' },
      port: { type: 'string', value: 'N', help: 'with --forward-to: the port on 127.0.0.1 the tunnel points at' },
      'secret-file': { type: 'string', value: 'PATH', help: `where the endpoint's secret is written (default ${DEFAULT_SECRET_FILE})` },
      events: { type: 'string', value: 'a,b', help: 'the event types to subscribe (default: all)' },
      timeout: { type: 'string', value: 'S', help: `stop and delete the endpoint after S seconds (default ${DEFAULT_TIMEOUT_S})` },
    },
    examples: [
      'npx svc-webhooks listen --url https://abc.trycloudflare.com/webhooks/svc \\\n  --port 8787 --forward-to http://127.0.0.1:3000/webhooks/svc',
      '# your receiver: secret: new FileSecretSource({ path: ".svc-webhooks-secret" })',
    ],
    exitCodes: '0 stopped (Ctrl-C, SIGTERM or --timeout) and the endpoint deleted, 1 the service refused a call or the endpoint could not be deleted, 2 usage error.',
  },
  async ({ values }, io) => {
    const url = httpUrl(values.url, '--url (the public URL of your tunnel)')
    if (url.protocol !== 'https:' && !isLoopback(url.hostname)) throw new UsageError('--url must be https: the service delivers only to https URLs on 443.')
    const target = values['forward-to'] === undefined ? undefined : httpUrl(values['forward-to'], '--forward-to')
    if (target && values.port === undefined) throw new UsageError('--forward-to needs --port: the port on 127.0.0.1 your tunnel points at.')
    const port = values.port === undefined ? undefined : integer(values.port, '--port', 0, { min: 1 })
    const timeoutS = integer(values.timeout, '--timeout', DEFAULT_TIMEOUT_S)
    const secretFile = resolve(values['secret-file'] ?? DEFAULT_SECRET_FILE)
    const subscribed = values.events === undefined ? [] : values.events.split(',').map((e) => e.trim()).filter(Boolean)
    const service = serviceFromEnv(io)
    const proxy = target && port ? forwarder(port, target, io) : undefined
    await proxy?.start()

    // A listen stopped by SIGKILL or a power cut could not delete its endpoint: one for the same
    // tunnel URL, labelled by listen, is that leftover (a tunnel URL belongs to one machine).
    for (const stale of await service.endpoints.list()) {
      if (stale.url !== url.href || !stale.label.startsWith(LABEL_PREFIX)) continue
      await service.endpoints.remove(stale.id)
      io.out(`endpoint ${stale.id} deleted: an earlier listen for ${url.href} stopped without deleting it\n`)
    }
    const endpoint = await service.endpoints.create({ label: `${LABEL_PREFIX}${randomUUID().slice(0, 8)}`, url: url.href, subscribed_events: subscribed })
    let cleaned: Promise<number> | undefined
    /** Deletes the endpoint and the secret file once, whatever stopped us. */
    const cleanup = (why: string) =>
      (cleaned ??= (async () => {
        await proxy?.stop()
        rmSync(secretFile, { force: true })
        try {
          await service.endpoints.remove(endpoint.id)
          io.out(`${why}: endpoint ${endpoint.id} deleted, ${secretFile} removed\n`)
          return EXIT.ok
        } catch (error) {
          io.err(`svc-webhooks listen: ${why}, but endpoint ${endpoint.id} could not be deleted (${(error as Error).message}); delete it with: svc-webhooks endpoints delete ${endpoint.id}\n`)
          return EXIT.failed
        }
      })())

    try {
      // As FileSecretSource reads it: the JSON state.
      writeSecretFile(secretFile, `${JSON.stringify({ secrets: [endpoint.signing_secret] })}\n`)
    } catch (error) {
      await cleanup(`could not write ${secretFile} (${(error as Error).message})`)
      return EXIT.failed
    }
    io.out(
      `endpoint ${endpoint.id} registered for ${url.href}\n` +
        `secret written to ${secretFile} (read it with new FileSecretSource({ path: ${JSON.stringify(secretFile)} }))\n` +
        (proxy ? `forwarding deliveries from 127.0.0.1:${port} to ${target!.href}\n` : 'deliveries go from your tunnel to your receiver\n') +
        `listening; Ctrl-C deletes the endpoint (at the latest in ${timeoutS} s)\n`,
    )

    // Every way out deletes the endpoint: a signal, the timeout, or an error thrown anywhere.
    let crashed = false
    const code = await new Promise<number>((done) => {
      const finish = (why: string) => {
        clearTimeout(timer)
        process.off('SIGINT', onInt).off('SIGTERM', onTerm).off('uncaughtException', onCrash).off('unhandledRejection', onCrash)
        void cleanup(why).then(done)
      }
      const onInt = () => finish('stopped (SIGINT)')
      const onTerm = () => finish('stopped (SIGTERM)')
      const onCrash = (error: unknown) => {
        io.err(`svc-webhooks listen: ${(error as Error)?.message ?? String(error)}\n`)
        finish('crashed')
        crashed = true
      }
      const timer = setTimeout(() => finish(`stopped after --timeout ${timeoutS} s`), timeoutS * 1000)
      process.once('SIGINT', onInt).once('SIGTERM', onTerm).once('uncaughtException', onCrash).once('unhandledRejection', onCrash)
    })
    return crashed ? EXIT.failed : code
  },
)
