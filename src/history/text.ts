/**
 * What the history keeps of an error, a body and a query: a handler's message may quote the
 * payload, a token or a connection string, so it is capped, stripped of control characters and of
 * anything shaped like a secret or a signature before it is stored (and again escaped where shown).
 */
import { LONE_SURROGATE } from '../log-window.js'
import { positiveOption } from '../option-checks.js'
import { DEFAULT_HISTORY_RETENTION_MS, DEFAULT_PAGE, HISTORY_OUTCOMES, MAX_PAGE, type HistoryOptions, type HistoryQuery } from './types.js'

/** The longest error message kept. */
export const MAX_ERROR_MESSAGE = 300

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g
/** Endpoint secrets, signatures, bearer tokens, credentials in URLs, long hex or base64 runs. */
const SECRETS: RegExp[] = [
  /svc_whsec_[A-Za-z0-9+/=_-]*/g,
  /\bv[12]=[A-Za-z0-9+/=]+/g,
  /\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+/gi,
  /\/\/[^/\s:@]+:[^/\s@]+@/g,
  /\b[A-Fa-f0-9]{32,}\b/g,
  /\b[A-Za-z0-9+/_-]{40,}={0,2}/g,
]

/**
 * `text` as it may be stored and shown: secrets replaced by `[redacted]`, control characters by
 * spaces, capped at `max`.
 *
 * @example
 * sanitizeMessage('connect failed: postgres://app:hunter2@db/x') // 'connect failed: postgres://[redacted]@db/x'
 */
export function sanitizeMessage(text: string, max = MAX_ERROR_MESSAGE): string {
  let out = text.length > max * 4 ? text.slice(0, max * 4) : text
  for (const pattern of SECRETS) out = out.replace(pattern, (m) => (m.startsWith('//') ? '//[redacted]@' : '[redacted]'))
  out = out.replace(CONTROL, ' ').replace(LONE_SURROGATE, '')
  return out.length > max ? `${out.slice(0, max - 1)}…` : out
}

/** An error as the history keeps it: its name (capped) and its sanitized message. */
export function errorFields(error: unknown): { name: string; message: string } {
  try {
    if (error instanceof Error) return { name: sanitizeMessage(String(error.name), 60), message: sanitizeMessage(String(error.message)) }
    return { name: typeof error, message: typeof error === 'string' ? sanitizeMessage(error) : '' }
  } catch {
    return { name: 'Error', message: 'an error that cannot be turned into text' }
  }
}

/** The options every engine shares, validated once (at creation). */
export function historySettings(options: HistoryOptions, defaultMax: number) {
  const {
    retentionMs = DEFAULT_HISTORY_RETENTION_MS,
    maxEntries = defaultMax,
    keepBodies = false,
    redact,
    maxBodyBytes = 65_536,
    now = Date.now,
  } = options
  positiveOption(retentionMs, 'history `retentionMs`')
  positiveOption(maxEntries, 'history `maxEntries`', 'entries')
  positiveOption(maxBodyBytes, 'history `maxBodyBytes`', 'bytes')
  if (redact !== undefined && typeof redact !== 'function') throw new TypeError('svc-webhooks: history `redact` must be a function of the event returning what to keep.')
  if (typeof keepBodies !== 'boolean') throw new TypeError('svc-webhooks: history `keepBodies` must be true or false.')
  const log = options.log === false ? undefined : (options.log ?? ((line: string) => console.warn(line)))
  return { retentionMs, maxEntries: Math.floor(maxEntries), keepBodies, redact, maxBodyBytes, now, log }
}

/** A query's page size and time range, checked; an unknown outcome is a TypeError, not an empty page. */
export function pageOf(query: HistoryQuery): { limit: number; since: number; until: number } {
  const limit = Math.min(MAX_PAGE, Math.max(1, Math.floor(query.limit ?? DEFAULT_PAGE)))
  if (query.outcome !== undefined && !HISTORY_OUTCOMES.includes(query.outcome)) throw new TypeError(`svc-webhooks: history outcome must be one of ${HISTORY_OUTCOMES.join(', ')}.`)
  const since = query.since ?? 0
  const until = query.until ?? Number.MAX_SAFE_INTEGER
  if (!Number.isFinite(since) || !Number.isFinite(until)) throw new TypeError('svc-webhooks: history `since` and `until` must be times in milliseconds.')
  return { limit: Number.isFinite(limit) ? limit : DEFAULT_PAGE, since, until }
}

/** An opaque cursor: the last entry's sort key. */
export function encodeCursor(parts: (string | number)[]): string {
  return btoa(unescape(encodeURIComponent(JSON.stringify(parts)))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

export function decodeCursor(cursor: string | undefined): (string | number)[] | undefined {
  if (cursor === undefined || cursor === '') return undefined
  try {
    const parts: unknown = JSON.parse(decodeURIComponent(escape(atob(cursor.replace(/-/g, '+').replace(/_/g, '/')))))
    if (Array.isArray(parts) && parts.every((p) => typeof p === 'string' || typeof p === 'number')) return parts as (string | number)[]
  } catch {
    // Below.
  }
  throw new TypeError('svc-webhooks: history `cursor` is not one a page returned.')
}
