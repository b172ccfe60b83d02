/**
 * Reading the project's Markdown as GitHub and npm show it: heading anchors, the prose outside
 * code, and the relative links that do not resolve. Shared by the README and docs tests.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/**
 * GitHub's anchor for a heading: inline markup dropped, lowercase, punctuation gone, spaces to hyphens.
 *
 * @example
 * slug('What the sender is told') // 'what-the-sender-is-told'
 */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** Markdown without fenced code blocks or inline code spans (links there are not links). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '``')
}

function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const m of markdown.replace(/^```[\s\S]*?^```$/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/**
 * The relative links of the Markdown file at `path` that do not resolve to a file under `within`
 * (and, for a `.md` target, to one of its headings), each with why.
 *
 * @example
 * expect(brokenLinks('/repo/docs/express.md', '/repo')).toEqual([])
 */
export function brokenLinks(path: string, within: string): string[] {
  const broken: string[] = []
  for (const m of prose(readFileSync(path, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:
    const [pathPart, anchor] = target.split('#') as [string, string | undefined]
    const resolved = pathPart === '' ? path : resolve(dirname(path), pathPart)
    if (!resolved.startsWith(`${resolve(within)}/`) || !existsSync(resolved)) {
      broken.push(`${target}: no such file${resolved.startsWith(`${resolve(within)}/`) ? '' : ` under ${within}`}`)
      continue
    }
    if (anchor !== undefined && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
      broken.push(`${target}: no such heading`)
    }
  }
  return broken
}
