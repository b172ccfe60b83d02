/**
 * The console's HTML: one escape for every untrusted string (delivery ids, endpoint names,
 * handler messages and bodies are attacker-influenced), the layout and its one inline style
 * sheet (allowed by the response's nonce, so the Content-Security-Policy needs no 'unsafe-inline').
 */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' }

/**
 * `value` as HTML text or a quoted attribute value: the only way a string reaches a page.
 *
 * @example
 * escapeHtml('<script>') // '&lt;script&gt;'
 */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"'`]/g, (c) => ESCAPES[c]!)
}

/** A piece of HTML built by {@link html}: already escaped, safe to nest. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

/**
 * A template tag: every interpolated value is escaped unless it is {@link Html} (or an array of
 * them), so a page cannot forget to escape.
 *
 * @example
 * html`<td>${entry.id}</td>`
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += piece(values[i]) + strings[i + 1]!
  return new Html(out)
}

function piece(value: unknown): string {
  if (value instanceof Html) return value.text
  if (Array.isArray(value)) return value.map(piece).join('')
  if (value === undefined || value === null || value === false) return ''
  return escapeHtml(value)
}

const STYLE = `
:root{color-scheme:light dark;--fg:#1d2430;--muted:#5c6675;--bg:#f7f8fa;--card:#fff;--line:#dfe3ea;--accent:#2759c9;--bad:#b3261e;--good:#1e7a3c;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ef;--muted:#9aa4b2;--bg:#12151a;--card:#1b2028;--line:#2c333e;--accent:#7aa2ff;--bad:#ff8a80;--good:#7bd88f;--warn:#e3b341}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;gap:1.2rem;align-items:center;padding:.7rem 1.2rem;border-bottom:1px solid var(--line);background:var(--card)}
header strong{margin-right:1rem}nav a{color:var(--muted);text-decoration:none;margin-right:1rem}nav a.on{color:var(--fg);font-weight:600}
main{padding:1.2rem;max-width:1200px}h1{font-size:1.25rem;margin:0 0 1rem}h2{font-size:1rem;margin:1.4rem 0 .6rem}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:.8rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.7rem .9rem}.card b{display:block;font-size:1.35rem}.card span{color:var(--muted)}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line)}th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}td code{font-size:12px;word-break:break-all}
.o-processed,.ok{color:var(--good)}.o-failed,.o-dead,.bad{color:var(--bad)}.o-retrying,.o-accepted,.warn{color:var(--warn)}
form.inline{display:inline}button{font:inherit;padding:.25rem .7rem;border:1px solid var(--line);border-radius:6px;background:var(--card);color:var(--accent);cursor:pointer}
button.danger{color:var(--bad)}input,select{font:inherit;padding:.25rem .4rem;border:1px solid var(--line);border-radius:6px;background:var(--card);color:var(--fg)}
.filters{display:flex;flex-wrap:wrap;gap:.6rem;align-items:end;margin-bottom:.8rem}.filters label{display:flex;flex-direction:column;color:var(--muted);font-size:12px}
.notice{padding:.6rem .9rem;border:1px solid var(--line);border-radius:8px;background:var(--card);margin-bottom:1rem}
pre{background:var(--card);border:1px solid var(--line);padding:.8rem;overflow:auto;max-height:30rem}.muted{color:var(--muted)}dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}dt{color:var(--muted)}dd{margin:0}
`

export const PAGES = [
  ['', 'Overview'],
  ['history', 'History'],
  ['dead', 'Dead letters'],
  ['refusals', 'Refusals'],
] as const

/** A whole page: the navigation (relative links, so the console works under any path) and `body`. */
export function layout(title: string, current: string, body: Html, nonce: string, readOnly: boolean): string {
  const nav = PAGES.map(([path, label]) => html`<a href="./${path}" class="${path === current ? 'on' : ''}">${label}</a>`)
  return `<!doctype html>${html`<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="same-origin"><title>${title} · svc-webhooks console</title><style nonce="${nonce}">${new Html(STYLE)}</style></head>
<body><header><strong>svc-webhooks</strong><nav>${nav}</nav>${readOnly ? html`<span class="muted">read-only</span>` : ''}</header><main>${body}</main></body></html>`.text}`
}

/** A time as ISO text (UTC), or a dash. */
export function time(ms: number | undefined): string {
  return ms === undefined || !Number.isFinite(ms) ? '—' : new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')
}
