/**
 * The benchmark chart: horizontal bars of ns/op per implementation, one panel per body size, on
 * a log scale, as a self-contained SVG (no dependencies). `bench/verify.mjs` calls
 * `renderChart`; `node bench/chart.mjs [docs/benchmarks.json] > docs/benchmarks.svg` redraws it.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const COLORS = { floor: '#8a8f98', ours: '#1f6feb', peer: '#d1861a' }
const ROW_H = 18
const LABEL_W = 330
const BAR_W = 300
const PANEL_GAP = 28

const escape = (text) => String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])
const sizeLabel = (size) => (size >= 1024 ? `${size / 1024} KiB` : `${size} B`)
const fmt = (ns) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(1)} µs` : `${Math.round(ns)} ns`)

/**
 * Renders a summary written by bench/verify.mjs (`{ sizes, rows: [{ label, kind, sizes: { [size]: { ns } } }] }`)
 * as an SVG string.
 */
export function renderChart(summary) {
  const all = summary.rows.flatMap((row) => summary.sizes.map((s) => row.sizes[s].ns))
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all))))
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all))))
  const x = (ns) => LABEL_W + (BAR_W * Math.log10(ns / lo)) / Math.log10(hi / lo)
  const panelH = summary.rows.length * ROW_H + 24
  const width = LABEL_W + BAR_W + 90
  const height = 46 + summary.sizes.length * (panelH + PANEL_GAP) + 20
  const out = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="11">`)
  out.push(`<rect width="100%" height="100%" fill="#ffffff"/>`)
  out.push(`<text x="10" y="18" font-size="13" font-weight="600">Verifying one delivery: ns/op (median), log scale: shorter is faster</text>`)
  const legend = [['floor', 'floor / baseline'], ['ours', 'svc-webhooks'], ['peer', 'peer library']]
  legend.forEach(([kind, text], i) => {
    out.push(`<rect x="${10 + i * 130}" y="27" width="10" height="10" fill="${COLORS[kind]}"/>`)
    out.push(`<text x="${24 + i * 130}" y="36">${escape(text)}</text>`)
  })
  let y = 46
  for (const size of summary.sizes) {
    out.push(`<text x="10" y="${y + 14}" font-weight="600">${escape(sizeLabel(size))} body</text>`)
    for (let t = lo; t <= hi; t *= 10) {
      out.push(`<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${y + 18}" y2="${y + panelH}" stroke="#e4e6ea"/>`)
      out.push(`<text x="${x(t).toFixed(1)}" y="${y + 14}" text-anchor="middle" fill="#666">${escape(fmt(t))}</text>`)
    }
    summary.rows.forEach((row, i) => {
      const ry = y + 22 + i * ROW_H
      const ns = row.sizes[size].ns
      out.push(`<text x="${LABEL_W - 6}" y="${ry + 11}" text-anchor="end">${escape(row.label)}</text>`)
      out.push(`<rect x="${LABEL_W}" y="${ry + 2}" width="${Math.max(1, x(ns) - LABEL_W).toFixed(1)}" height="${ROW_H - 5}" fill="${COLORS[row.kind] ?? '#999'}"/>`)
      out.push(`<text x="${(x(ns) + 4).toFixed(1)}" y="${ry + 11}" fill="#333">${escape(fmt(ns))}</text>`)
    })
    y += panelH + PANEL_GAP
  }
  const m = summary.machine
  out.push(`<text x="10" y="${height - 8}" fill="#666">${escape(`${m.cpu}, ${m.cores} cores, Node ${m.node}; median of ${summary.runs} run(s), ${summary.date.slice(0, 10)}`)}</text>`)
  out.push('</svg>')
  return `${out.join('\n')}\n`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2] ?? new URL('../docs/benchmarks.json', import.meta.url)
  process.stdout.write(renderChart(JSON.parse(readFileSync(file, 'utf8'))))
}
