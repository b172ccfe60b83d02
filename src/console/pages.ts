/**
 * The console's pages, each a function of what the engines answered: no engine call happens
 * while HTML is built, so an engine failure is a 503 before any markup (handler.ts). Every
 * string from a delivery, an endpoint, a handler or the service goes through `html`'s escape.
 */
import type { DeadLetter, InboxStats } from '../contracts/inbox.js'
import type { HistoryEntry, HistoryPage, HistoryQuery, HistoryStats, RefusalCount } from '../history/types.js'
import { HISTORY_OUTCOMES } from '../history/types.js'
import { sanitizeMessage } from '../history/text.js'
import type { ReceiverStats } from '../visibility.js'
import { html, Html, time } from './html.js'

/** What every page needs to draw its actions. */
export interface PageContext {
  /** The CSRF token; undefined when read-only (no forms at all). */
  token: string | undefined
  canReplay: boolean
  canResend: boolean
  showBodies: boolean
  redact: ((event: unknown) => unknown) | undefined
}

/** A POST form with one button; nothing when read-only. */
function action(ctx: PageContext, act: string, label: string, fields: Record<string, string | undefined>, danger = false): Html | '' {
  if (ctx.token === undefined) return ''
  const inputs = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)
  return html`<form class="inline" method="post" action="./action"><input type="hidden" name="csrf" value="${ctx.token}"><input type="hidden" name="do" value="${act}">${inputs}<button type="submit" class="${danger ? 'danger' : ''}" data-action="${act}">${label}</button></form>`
}

const card = (label: string, value: unknown, cls = '') => html`<div class="card"><b class="${cls}">${value}</b><span>${label}</span></div>`

/** A body as shown: JSON through `redact`, pretty-printed and escaped; hidden without `showBodies`. */
function bodyBlock(ctx: PageContext, body: string | undefined, redacted?: boolean): Html {
  if (!ctx.showBodies) return html`<p class="muted">Body hidden (the console's <code>showBodies</code> is off).</p>`
  if (body === undefined) return html`<p class="muted">No body kept.</p>`
  let shown: string
  try {
    const event: unknown = JSON.parse(body)
    shown = JSON.stringify(ctx.redact ? ctx.redact(event) : event, null, 2) ?? ''
  } catch {
    shown = ctx.redact ? '(not JSON: hidden, since it cannot pass through redact)' : body
  }
  return html`${redacted ? html`<p class="muted">Kept through the history's <code>redact</code>.</p>` : ''}<pre>${shown}</pre>`
}

export interface OverviewData {
  receiver?: ReceiverStats
  inbox?: InboxStats & { paused?: boolean }
  workerActive?: number
  flow?: { paused: boolean | undefined }
  history?: { size: number; stats: HistoryStats; recent: HistoryEntry[] }
  endpoint?: { id: string; label?: string; url?: string; enabled: boolean; consecutive_failures: number; last_error: string | null; last_delivery_at?: string | null } | 'missing'
  endpointId?: string
}

export function overviewPage(ctx: PageContext, d: OverviewData): Html {
  const r = d.receiver
  const answers = r ? Object.entries(r.answers).map(([k, v]) => card(`answered ${k}`, v, k === 'processed' ? 'ok' : k === 'handler_failed' ? 'bad' : '')) : []
  const streak = r ? card('failing answers in a row (the sender disables at 20)', r.consecutiveFailures, r.consecutiveFailures > 0 ? 'bad' : 'ok') : ''
  const ep = d.endpoint
  return html`<h1>Overview</h1>
${r ? html`<h2>Receiver</h2><div class="cards" id="receiver">${streak}${answers}</div>${r.lastFailure ? html`<p>Last failing answer: ${r.lastFailure.status} <code>${r.lastFailure.code}</code> at ${time(r.lastFailure.at)}</p>` : ''}` : ''}
${d.inbox ? html`<h2>Inbox and worker</h2><div class="cards" id="inbox">${card('waiting or running', d.inbox.depth)}${card('oldest, seconds', Math.round(d.inbox.oldestAgeMs / 1000))}${card('retrying', d.inbox.retrying, d.inbox.retrying > 0 ? 'warn' : '')}${card('dead letters', d.inbox.dead, d.inbox.dead > 0 ? 'bad' : 'ok')}${d.workerActive !== undefined ? card('running now', d.workerActive) : ''}${d.flow ? card('flow', d.flow.paused ? 'paused' : 'running', d.flow.paused ? 'warn' : 'ok') : ''}</div>
${d.flow ? html`<p>${d.flow.paused ? action(ctx, 'resume', 'Resume every worker', {}) : action(ctx, 'pause', 'Pause every worker', {}, true)} <span class="muted">Receivers keep answering 202 while paused.</span></p>` : ''}` : ''}
${ep ? html`<h2>The endpoint as the service sees it</h2>${ep === 'missing' ? html`<p class="bad">The service has no endpoint <code>${d.endpointId}</code>.</p>` : html`<div class="cards" id="endpoint">${card('at the service', ep.enabled ? 'enabled' : 'disabled', ep.enabled ? 'ok' : 'bad')}${card('consecutive failures (disabled at 20)', ep.consecutive_failures, ep.consecutive_failures > 0 ? 'warn' : 'ok')}</div>
<dl><dt>endpoint</dt><dd><code>${ep.id}</code> ${ep.label ?? ''}</dd><dt>url</dt><dd><code>${ep.url ?? ''}</code></dd><dt>last error</dt><dd>${ep.last_error === null ? '—' : sanitizeMessage(ep.last_error, 500)}</dd><dt>last delivery</dt><dd>${ep.last_delivery_at ?? '—'}</dd></dl>
${ep.enabled ? '' : action(ctx, 'enable', 'Enable the endpoint', {})}`}` : ''}
${d.history ? html`<h2>History</h2><div class="cards" id="history-stats">${card('entries kept', d.history.size)}${card('records written', d.history.stats.recorded)}${card('records lost to an outage', d.history.stats.failed + d.history.stats.dropped, d.history.stats.failed + d.history.stats.dropped > 0 ? 'bad' : 'ok')}</div>
<h2>Latest deliveries</h2>${entriesTable(d.history.recent)}` : ''}`
}

function entriesTable(entries: HistoryEntry[]): Html {
  if (entries.length === 0) return html`<p class="muted">No deliveries.</p>`
  return html`<table><thead><tr><th>delivery</th><th>endpoint</th><th>event</th><th>outcome</th><th>status</th><th>attempts</th><th>received</th><th>error</th></tr></thead><tbody>
${entries.map((e) => html`<tr data-id="${e.id}"><td><a href="./entry?id=${encodeURIComponent(e.id)}&amp;endpoint=${encodeURIComponent(e.endpoint)}"><code>${e.id}</code></a></td><td>${e.endpoint}</td><td>${e.eventType ?? ''}</td><td class="o-${e.outcome}">${e.outcome}${e.replays > 0 ? html` <span class="muted">(replayed ${e.replays}×)</span>` : ''}</td><td>${e.status ?? ''}</td><td>${e.attempts}</td><td>${time(e.receivedAt)}</td><td>${e.errorName ? html`<code>${e.errorName}</code>: ${e.errorMessage ?? ''}` : ''}</td></tr>`)}
</tbody></table>`
}

const toInput = (ms: number | undefined) => (ms === undefined ? '' : new Date(ms).toISOString().slice(0, 16))

export function historyPage(query: HistoryQuery & { id?: string }, page: HistoryPage): Html {
  const qs = (cursor: string) => {
    const p = new URLSearchParams()
    if (query.endpoint) p.set('endpoint', query.endpoint)
    if (query.outcome) p.set('outcome', query.outcome)
    if (query.since !== undefined) p.set('since', toInput(query.since))
    if (query.until !== undefined) p.set('until', toInput(query.until))
    p.set('cursor', cursor)
    return `./history?${p}`
  }
  return html`<h1>History</h1>
<form class="filters" method="get" action="./history">
<label>delivery id<input name="id" value="${query.id ?? ''}" size="28"></label>
<label>endpoint<input name="endpoint" value="${query.endpoint ?? ''}" size="14"></label>
<label>outcome<select name="outcome"><option value="">any</option>${HISTORY_OUTCOMES.map((o) => html`<option value="${o}"${o === query.outcome ? new Html(' selected') : ''}>${o}</option>`)}</select></label>
<label>since (UTC)<input type="datetime-local" name="since" value="${toInput(query.since)}"></label>
<label>until (UTC)<input type="datetime-local" name="until" value="${toInput(query.until)}"></label>
<button type="submit">Search</button></form>
${entriesTable(page.entries)}
${page.cursor ? html`<p><a id="older" href="${qs(page.cursor)}">Older →</a></p>` : ''}`
}

export function entryPage(ctx: PageContext, e: HistoryEntry, canReplayHere: boolean): Html {
  const replay = canReplayHere && e.hasBody ? action(ctx, 'replay', 'Replay through the handler', { id: e.id, endpoint: e.endpoint }) : ''
  const resend = ctx.canResend ? action(ctx, 'resend', 'Ask the service to resend', { id: e.id }) : ''
  return html`<h1>Delivery <code>${e.id}</code></h1>
<dl id="entry"><dt>endpoint</dt><dd>${e.endpoint}</dd><dt>event type</dt><dd>${e.eventType ?? '—'}</dd>
<dt>outcome</dt><dd class="o-${e.outcome}" id="outcome">${e.outcome}</dd><dt>last answer</dt><dd>${e.status ?? '—'} ${e.code ? html`<code>${e.code}</code>` : ''}</dd>
<dt>received</dt><dd>${time(e.receivedAt)}</dd><dt>processed</dt><dd>${time(e.processedAt)}</dd><dt>updated</dt><dd>${time(e.updatedAt)}</dd>
<dt>attempts</dt><dd>${e.attempts}</dd><dt>delivered by the sender</dt><dd>${e.deliveries}×</dd><dt>replays</dt><dd>${e.replays}${e.replayedAt ? html`, last ${time(e.replayedAt)}` : ''}</dd>
<dt>error</dt><dd>${e.errorName ? html`<code>${e.errorName}</code>: ${e.errorMessage ?? ''}` : '—'}</dd></dl>
<p>${replay} ${resend}</p>
${e.hasBody ? '' : html`<p class="muted">Its body was not kept (history <code>keepBodies</code>), so it cannot be replayed here${ctx.canResend ? ': ask the service to resend it' : ': ask the service to resend it (svc-webhooks endpoints resend, or the service client)'}.</p>`}
<h2>Body</h2>${bodyBlock(ctx, e.body, e.bodyRedacted)}`
}

export function deadPage(ctx: PageContext, letters: DeadLetter[]): Html {
  const decoder = new TextDecoder()
  return html`<h1>Dead letters</h1>
${letters.length === 0 ? html`<p class="muted">No dead letters.</p>` : html`<table><thead><tr><th>delivery</th><th>endpoint</th><th>reason</th><th>attempts</th><th>handed out</th><th>dead since</th><th></th></tr></thead><tbody>
${letters.map((l) => html`<tr data-id="${l.id}"><td><code>${l.id}</code></td><td>${l.endpoint}</td><td>${sanitizeMessage(l.lastError, 500)}</td><td>${l.attempts}</td><td>${l.takes}</td><td>${time(l.deadAt)}</td><td>${action(ctx, 'requeue', 'Requeue', { key: l.keys[0] })} ${action(ctx, 'purge', 'Purge', { key: l.keys[0] }, true)}</td></tr>
${ctx.showBodies ? html`<tr><td colspan="7">${bodyBlock(ctx, decoder.decode(l.rawBody))}</td></tr>` : ''}`)}
</tbody></table>`}`
}

export function refusalsPage(ctx: PageContext, rows: RefusalCount[]): Html {
  const totals = new Map<string, number>()
  for (const r of rows) totals.set(r.code, (totals.get(r.code) ?? 0) + r.count)
  return html`<h1>Refusals</h1>
<p class="muted">Requests refused before their signature verified, counted per code and minute over the last day. Their ids are only what the request claimed.</p>
<div class="cards" id="refusal-totals">${[...totals].map(([code, n]) => card(code, n, 'bad'))}</div>
${rows.length === 0 ? html`<p class="muted">No refusals.</p>` : html`<h2>By minute</h2><table><thead><tr><th>minute</th><th>code</th><th>count</th><th>claimed ids</th></tr></thead><tbody>
${rows.map((r) => html`<tr><td>${time(r.windowStart)}</td><td><code>${r.code}</code></td><td>${r.count}</td><td>${r.claimedIds.map((id) => html`<div><code>${id}</code> ${ctx.canResend ? action(ctx, 'resend', 'Resend through the service', { id }) : ''}</div>`)}</td></tr>`)}
</tbody></table>`}`
}

export function messagePage(title: string, message: Html | string, back: string): Html {
  return html`<h1>${title}</h1><div class="notice" id="notice">${message}</div><p><a href="${back}" id="back">Back</a></p>`
}
