/**
 * `createConsole`: the console as one Fetch handler (`(request) => Promise<Response>`), mounted
 * under any path of any server the package supports. Every request is authorized first; pages
 * are GETs that change nothing, actions are POSTs behind the CSRF guard (guard.ts). Engines are
 * read before any HTML is built, each within `timeoutMs`: an outage is a 503 page, never a throw
 * into the host application.
 */
import type { HistoryQuery, HistoryOutcome } from '../history/types.js'
import { positiveOption } from '../option-checks.js'
import { TIMED_OUT, within as timed } from '../secrets/within.js'
import { HISTORY_OUTCOMES } from '../history/types.js'
import { CsrfGuard, nonce as newNonce, refusal, sameOrigin, securityHeaders } from './guard.js'
import { html, layout, type Html } from './html.js'
import type { ConsoleInbox, ConsoleOptions } from './options.js'
import { deadPage, entryPage, historyPage, messagePage, overviewPage, refusalsPage, type OverviewData, type PageContext } from './pages.js'

const PAGE_NAMES = new Set(['', 'history', 'dead', 'refusals', 'entry', 'action'])
/** The largest action form read: a few hidden fields. */
const MAX_FORM_BYTES = 16 * 1024

class Unavailable extends Error {
  override readonly name = 'Unavailable'
}

/** `promise` within `ms`, or an {@link Unavailable} naming `what` (never the engine's message: it may quote a command). */
async function within<T>(what: string, ms: number, promise: Promise<T> | T): Promise<T> {
  let value: T | typeof TIMED_OUT
  try {
    value = await timed(promise, ms)
  } catch (error) {
    throw new Unavailable(`${what} failed (${error instanceof Error ? String(error.name).slice(0, 60) : 'error'})`)
  }
  if (value === TIMED_OUT) throw new Unavailable(`${what} did not answer within ${ms} ms`)
  return value
}

/** `datetime-local` text (taken as UTC) or milliseconds, to milliseconds. */
function parseTime(value: string | null): number | undefined {
  if (value === null || value === '') return undefined
  if (/^\d+$/.test(value)) return Number(value)
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`)
  return Number.isFinite(ms) ? ms : undefined
}

/**
 * Creates the console: a Fetch handler. `authorize` is required; without it this throws.
 *
 * @example
 * import { createConsole } from 'svc-webhooks/console'
 * const console = createConsole({
 *   authorize: (request) => request.headers.get('authorization') === `Bearer ${process.env.CONSOLE_TOKEN}`,
 *   history, receiver, worker, service, endpointId: process.env.SVC_ENDPOINT_ID,
 * })
 * app.all('/admin/webhooks/*', (c) => console(c.req.raw)) // Hono
 */
export function createConsole(options: ConsoleOptions): (request: Request) => Promise<Response> {
  if (typeof options?.authorize !== 'function') {
    throw new TypeError(
      'svc-webhooks: createConsole needs `authorize(request)`, deciding who may see and act on your deliveries, ' +
        "e.g. (request) => request.headers.get('authorization') === `Bearer ${process.env.CONSOLE_TOKEN}`. There is no open console.",
    )
  }
  const { authorize, history, receiver, worker, service, endpointId, readOnly = false, showBodies = false, redact, basePath, allowedOrigins = [], timeoutMs = 5000, now = Date.now } = options
  if (redact !== undefined && typeof redact !== 'function') throw new TypeError('svc-webhooks: createConsole `redact` must be a function of the event.')
  if (service !== undefined && (typeof service?.endpoints?.list !== 'function' || typeof service.deliveries?.resend !== 'function')) {
    throw new TypeError('svc-webhooks: createConsole `service` must be createServiceClient(...) from svc-webhooks/service.')
  }
  // Finite too: Infinity would be a timer that fires at once, every page a 503.
  positiveOption(timeoutMs, 'createConsole `timeoutMs`')
  const inbox: ConsoleInbox | undefined = options.inbox ?? worker?.inbox
  const guard = new CsrfGuard(options.csrfSecret, now)
  const replayer = typeof worker?.replay === 'function' ? worker : typeof receiver?.replay === 'function' ? receiver : undefined
  const flow = typeof worker?.pause === 'function' && typeof worker.resume === 'function' ? worker : undefined

  function pageOf(url: URL): string | undefined {
    let path = url.pathname
    if (basePath !== undefined) {
      const base = basePath.replace(/\/+$/, '')
      if (!path.startsWith(base)) return undefined
      path = path.slice(base.length)
      if (path === '') return undefined
      return PAGE_NAMES.has(path.replace(/^\//, '')) ? path.replace(/^\//, '') : 'not_found'
    }
    const last = path.slice(path.lastIndexOf('/') + 1)
    // A last segment that is no page is the mount point itself, without its slash.
    return PAGE_NAMES.has(last) ? last : undefined
  }

  function respond(status: number, title: string, current: string, body: Html, extra: Record<string, string> = {}): Response {
    const n = newNonce()
    return new Response(layout(title, current, body, n, readOnly), {
      status,
      headers: { ...securityHeaders(n), 'content-type': 'text/html; charset=utf-8', ...extra },
    })
  }

  const unavailable = (current: string, error: unknown) =>
    respond(503, 'Unavailable', current, messagePage('Unavailable', html`Could not read what this page shows: ${error instanceof Unavailable ? error.message : 'an engine failed'}. Nothing was changed; try again.`, './'), { 'retry-after': '5' })

  async function context(request: Request): Promise<PageContext> {
    return {
      token: readOnly ? undefined : await guard.token(request),
      canReplay: replayer !== undefined && history !== undefined,
      canResend: service !== undefined,
      showBodies,
      redact,
    }
  }

  async function overview(request: Request): Promise<Response> {
    const d: OverviewData = {}
    if (receiver) d.receiver = await within('the receiver', timeoutMs, receiver.stats())
    if (inbox) d.inbox = await within('the inbox', timeoutMs, inbox.stats())
    if (worker?.active !== undefined) d.workerActive = worker.active
    if (flow) d.flow = { paused: d.inbox?.paused ?? flow.paused }
    if (history) {
      const [size, page] = await Promise.all([within('the history', timeoutMs, history.size()), within('the history', timeoutMs, history.list({ limit: 10 }))])
      d.history = { size, stats: history.stats(), recent: page.entries }
    }
    if (service && endpointId) {
      const endpoints = await within('the service', timeoutMs, service.endpoints.list())
      d.endpoint = endpoints.find((e) => e.id === endpointId) ?? 'missing'
      d.endpointId = endpointId
    }
    return respond(200, 'Overview', '', overviewPage(await context(request), d))
  }

  async function historyView(url: URL): Promise<Response> {
    if (!history) return respond(200, 'History', 'history', messagePage('History', 'No history: pass the `history` option to the receiver, the worker and createConsole.', './'))
    const p = url.searchParams
    const outcome = p.get('outcome')
    const query: HistoryQuery & { id?: string } = { limit: 50 }
    const id = p.get('id')?.trim()
    if (id) query.id = id
    if (p.get('endpoint')) query.endpoint = p.get('endpoint')!
    if (outcome && HISTORY_OUTCOMES.includes(outcome as HistoryOutcome)) query.outcome = outcome as HistoryOutcome
    const since = parseTime(p.get('since'))
    const until = parseTime(p.get('until'))
    if (since !== undefined) query.since = since
    if (until !== undefined) query.until = until
    const cursor = p.get('cursor')
    if (cursor) query.cursor = cursor
    let page
    if (id) {
      const entry = await within('the history', timeoutMs, history.get(id, query.endpoint))
      page = { entries: entry ? [{ ...entry, body: undefined }] : [] }
    } else {
      // A cursor from another page (or made up) is the visitor's mistake, not an outage: the
      // engines refuse one with a TypeError, while a failing engine is still a 503.
      let badCursor = false
      const listed = Promise.resolve(history.list(query)).catch((error: unknown) => {
        badCursor = cursor !== null && error instanceof TypeError
        throw error
      })
      try {
        page = await within('the history', timeoutMs, listed)
      } catch (error) {
        if (badCursor) return respond(400, 'History', 'history', messagePage('History', 'That page link is not valid any more.', './history'))
        throw error
      }
    }
    return respond(200, 'History', 'history', historyPage(query, page))
  }

  async function entryView(request: Request, url: URL): Promise<Response> {
    const id = url.searchParams.get('id') ?? ''
    const endpoint = url.searchParams.get('endpoint') ?? undefined
    const entry = history && id ? await within('the history', timeoutMs, history.get(id, endpoint)) : undefined
    if (!entry) return respond(404, 'Not found', 'history', messagePage('Not found', html`No delivery <code>${id}</code> in the history.`, './history'))
    return respond(200, `Delivery ${id}`, 'history', entryPage(await context(request), entry, replayer !== undefined))
  }

  async function act(request: Request): Promise<Response> {
    if (readOnly) return refusal(403)
    if (!sameOrigin(request, allowedOrigins)) return refusal(403)
    const declared = Number(request.headers.get('content-length') ?? 0)
    if (declared > MAX_FORM_BYTES) return refusal(413)
    const text = await request.text()
    if (text.length > MAX_FORM_BYTES) return refusal(413)
    const form = new URLSearchParams(text)
    if (!(await guard.check(request, form.get('csrf')))) return refusal(403)
    const what = form.get('do')
    const id = form.get('id') ?? ''
    const key = form.get('key') ?? ''
    const endpoint = form.get('endpoint') || undefined
    const entryLink = `./entry?id=${encodeURIComponent(id)}${endpoint ? `&endpoint=${encodeURIComponent(endpoint)}` : ''}`
    const done = (title: string, message: Html | string, back: string) => respond(200, title, '', messagePage(title, message, back))
    switch (what) {
      case 'replay': {
        if (!replayer || !history) return refusal(404)
        try {
          const result = await within('the replay', timeoutMs * 12, replayer.replay!(id, endpoint))
          return done('Replayed', html`Delivery <code>${id}</code> ran through its handler again: <b class="o-${result.outcome}" id="replay-outcome">${result.outcome}</b>${result.error instanceof Error ? html` (<code>${String(result.error.name).slice(0, 60)}</code>)` : ''}.`, entryLink)
        } catch (error) {
          const code = (error as { code?: unknown }).code
          if (code === 'body_not_kept' || code === 'not_found' || code === 'no_handler') {
            return respond(409, 'Cannot replay', '', messagePage('Cannot replay', html`Delivery <code>${id}</code> cannot be replayed here (<code>${String(code)}</code>)${code === 'body_not_kept' && service ? ': ask the service to resend it' : ''}.`, entryLink))
          }
          throw error
        }
      }
      case 'requeue':
      case 'purge': {
        if (!inbox) return refusal(404)
        const ok = await within('the inbox', timeoutMs, what === 'requeue' ? inbox.requeue(key) : inbox.purge(key))
        return done(what === 'requeue' ? 'Requeued' : 'Purged', ok ? (what === 'requeue' ? 'The dead letter is due again now, with a full retry budget.' : 'The dead letter was deleted; its id stays processed for the retention window.') : 'No such dead letter (already requeued or purged).', './dead')
      }
      case 'resend': {
        if (!service) return refusal(404)
        await within('the service', timeoutMs, service.deliveries.resend(id))
        return done('Resend asked', html`The service will deliver <code>${id}</code> again shortly.`, './')
      }
      case 'enable': {
        if (!service || !endpointId) return refusal(404)
        await within('the service', timeoutMs, service.endpoints.enable(endpointId))
        return done('Enabled', 'The service enabled the endpoint again and reset its failure count.', './')
      }
      case 'pause':
      case 'resume': {
        if (!flow) return refusal(404)
        await within('the worker', timeoutMs, what === 'pause' ? flow.pause!() : flow.resume!())
        return done(what === 'pause' ? 'Paused' : 'Resumed', what === 'pause' ? 'Every worker on this inbox stops taking deliveries; receivers keep answering 202.' : 'Workers take deliveries again.', './')
      }
      default:
        return refusal(400)
    }
  }

  return async function handle(request: Request): Promise<Response> {
    let allowed: boolean | Response
    try {
      allowed = await authorize(request)
    } catch {
      return refusal(401)
    }
    if (allowed instanceof Response) {
      // The application's own refusal, stripped of any body it might carry.
      const challenge = allowed.headers.get('www-authenticate')
      return allowed.ok ? refusal(403) : refusal(allowed.status === 401 ? 401 : 403, challenge === null ? {} : { 'www-authenticate': challenge })
    }
    if (allowed !== true) return refusal(403)
    const url = new URL(request.url)
    const page = pageOf(url)
    const method = request.method.toUpperCase()
    if (page === undefined) {
      if (method !== 'GET' && method !== 'HEAD') return refusal(405, { allow: 'GET' })
      return new Response(null, { status: 308, headers: { ...securityHeaders(), location: `${url.pathname}/${url.search}` } })
    }
    if (page === 'action') {
      if (method !== 'POST') return refusal(405, { allow: 'POST' })
      try {
        return await act(request)
      } catch (error) {
        return unavailable('', error)
      }
    }
    if (method !== 'GET' && method !== 'HEAD') return refusal(405, { allow: 'GET' })
    try {
      switch (page) {
        case '':
          return await overview(request)
        case 'history':
          return await historyView(url)
        case 'entry':
          return await entryView(request, url)
        case 'dead': {
          if (!inbox) return respond(200, 'Dead letters', 'dead', messagePage('Dead letters', 'No inbox: pass `worker` or `inbox` to createConsole.', './'))
          const letters = await within('the inbox', timeoutMs, inbox.dead(200))
          return respond(200, 'Dead letters', 'dead', deadPage(await context(request), letters))
        }
        case 'refusals': {
          if (!history) return respond(200, 'Refusals', 'refusals', messagePage('Refusals', 'No history: refusals are counted by the `history` option.', './'))
          const rows = await within('the history', timeoutMs, history.refusals(now() - 24 * 60 * 60 * 1000))
          return respond(200, 'Refusals', 'refusals', refusalsPage(await context(request), rows))
        }
        default:
          return respond(404, 'Not found', '', messagePage('Not found', 'No such page.', './'))
      }
    } catch (error) {
      return unavailable(page, error)
    }
  }
}
