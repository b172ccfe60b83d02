/**
 * Log lines that neither an attacker's request rate nor an attacker's strings can drive. A
 * receiver's URL is public, so anyone can make it refuse: one line per refusal would let them
 * write the victim's log at their own rate. Here the first line of each kind is written at once,
 * the repeats within a window are only counted, and one summary line per kind and window says how
 * many there were. Memory is a fixed number of kinds, whatever the traffic; `printable` makes an
 * untrusted string (an endpoint name from a URL, an event type, an error's name) safe to put in a
 * line: no control characters, so no forged lines, and capped.
 */

/** How long repeats of a kind of line are counted before their summary line. */
export const LOG_WINDOW_MS = 10_000
/** Kinds with a window open at once; lines of any further kind are counted together. */
const MAX_KINDS = 100
/**
 * Delivery ids a summary names: enough for the sender's whole rate into a receiver that refuses
 * everything (20 deliveries/s for a 10 s window), so `svc-webhooks endpoints resend --from-log`
 * can resend every delivery refused by mistake; bounded, so a flood still writes a line of at
 * most about 10 KB per kind and window.
 */
export const MAX_SUMMARY_IDS = 250
/** Where lines of kinds past {@link MAX_KINDS} are counted. */
const OTHER = 'other lines'

/** Options of {@link createLogWindow}. */
export interface LogWindowOptions {
  /**
   * How long repeats of a kind are counted before their summary line, in milliseconds.
   * @default 10000
   */
  windowMs?: number
  /**
   * The clock, in milliseconds.
   * @default Date.now
   */
  now?: () => number
  /** Appended to each summary line, e.g. where every occurrence can still be seen. */
  hint?: string
}

/** Collapses repeated lines: see {@link createLogWindow}. */
export interface LogWindow {
  /**
   * Writes `line` (or what the function returns, called only then) now when no window of `kind`
   * is open (and opens one), or counts it in that window. `kind` is the summary's label: a fixed set of values (a code, a code and a known
   * endpoint), never a value taken from a request as is. `id` is the delivery id: the summary names
   * each distinct one, up to {@link MAX_SUMMARY_IDS}, so every delivery refused by mistake can be resent.
   */
  write(kind: string, line: string | (() => string), id?: string): void
  /** Writes the summary of every window with repeats now and closes every window: for a stop or a test. */
  flush(): void
}

interface Window {
  opened: number
  repeats: number
  /** The distinct UUID-shaped ids of the repeats, made printable. */
  ids: Set<string>
  /**
   * The distinct other ids, made printable: listed after {@link ids}, and the first to give up
   * their place when the window is full, as no delivery of the service has such an id (§6.1:
   * UUIDs) and made-up ones must not push a genuine one out of the summary.
   */
  odd: Set<string>
  /** Repeats whose id is not listed: none, or past the cap. */
  unlisted: number
}

/** A delivery id of the service's shape (spec §6.1: a UUID). */
export const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * A delivery id as a line names it: printable, and without a space, so each listed id is one token
 * whatever it holds (`\` is escaped by {@link printable}, so `\u0020` cannot be mistaken).
 */
export function printableId(id: string): string {
  return printable(id).replace(/ /g, '\\u0020')
}

type Timer = ReturnType<typeof setTimeout>

/**
 * Wraps a log function so that each kind of line is written at most twice per window: the
 * first at once, then one summary of the repeats when the window ends. The summary is written by
 * the next line of any kind after the window ends, or by a timer started for it (unref'd, so it
 * never keeps a process alive; started inside a call, never at module scope, as Workers require).
 *
 * @example
 * const window = createLogWindow((line) => console.warn(line))
 * window.write('401 invalid_signature', 'svc-webhooks: 401 invalid_signature (delivery a): ...', 'a') // written
 * window.write('401 invalid_signature', 'svc-webhooks: 401 invalid_signature (delivery b): ...', 'b') // counted
 * // 10 s later: "svc-webhooks: 401 invalid_signature: 1 more in the last 10 s, delivery id b"
 */
export function createLogWindow(log: (line: string) => void, { windowMs = LOG_WINDOW_MS, now = Date.now, hint }: LogWindowOptions = {}): LogWindow {
  if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs <= 0) throw new TypeError('svc-webhooks: `windowMs` must be a positive number.')
  const windows = new Map<string, Window>()
  const span = `${windowMs / 1000} s`
  /** The earliest time a window ends, or Infinity when none is open. */
  let nextEnd = Infinity
  let timer: Timer | undefined

  /** The summary of `window`, written at `at`: when that is a window or more after it ended (no timer ran), it says when the window was. */
  function summarize(kind: string, window: Window, at: number): void {
    if (window.repeats === 0) return
    const when = at - window.opened < 2 * windowMs ? `the last ${span}` : `the ${span} from ${new Date(window.opened).toISOString()}`
    const { ids, odd, unlisted } = window
    const count = ids.size + odd.size
    const named = count === 0 ? '' : `, delivery id${count === 1 ? '' : 's'} ${[...ids, ...odd].join(' ')}${unlisted > 0 ? ` (and ${thousands(unlisted)} not listed)` : ''}`
    log(`svc-webhooks: ${kind}: ${thousands(window.repeats)} more in ${when}${named}${hint ? `. ${hint}` : ''}`)
  }

  /** Closes the windows that have ended by `at`, writing their summaries. */
  function close(at: number): void {
    nextEnd = Infinity
    const ended: [string, Window][] = []
    for (const [kind, window] of windows) {
      const end = window.opened + windowMs
      if (at >= end) ended.push([kind, window])
      else if (end < nextEnd) nextEnd = end
    }
    // Written once the windows are settled, so a `log` that throws leaves them consistent.
    for (const [kind, window] of ended) {
      windows.delete(kind)
      summarize(kind, window, at)
    }
  }

  /** A timer for the next summary, so it comes out even when no line follows. */
  function arm(at: number): void {
    if (timer !== undefined || nextEnd === Infinity) return
    try {
      timer = setTimeout(fire, Math.max(1, nextEnd - at))
      // Node's timers have unref(); Deno's are numbers unref'd through Deno.unrefTimer.
      const handle = timer as unknown as { unref?: () => void }
      if (typeof handle.unref === 'function') handle.unref()
      else (globalThis as { Deno?: { unrefTimer?: (id: unknown) => void } }).Deno?.unrefTimer?.(timer)
    } catch {
      // A runtime without timers here: the next line writes the summary instead.
      timer = undefined
    }
  }

  function fire(): void {
    timer = undefined
    const at = now()
    try {
      close(at)
    } catch {
      // A `log` that throws here, outside any request, would end the process: the summary is lost instead.
    }
    if ([...windows.values()].some((window) => window.repeats > 0)) arm(at)
  }

  return {
    write(kind, line, id) {
      const at = now()
      if (at >= nextEnd) close(at)
      let window = windows.get(kind)
      if (window === undefined && windows.size >= MAX_KINDS) {
        kind = OTHER
        window = windows.get(kind)
      }
      if (window === undefined) {
        windows.set(kind, { opened: at, repeats: 0, ids: new Set(), odd: new Set(), unlisted: 0 })
        if (at + windowMs < nextEnd) nextEnd = at + windowMs
        log(typeof line === 'function' ? line() : line)
        return
      }
      window.repeats++
      if (id !== undefined) {
        const shown = printableId(id)
        const { ids, odd } = window
        if (ids.has(shown) || odd.has(shown)) {
          // Named already.
        } else if (ids.size + odd.size < MAX_SUMMARY_IDS) (UUID_SHAPE.test(id) ? ids : odd).add(shown)
        else if (odd.size > 0 && UUID_SHAPE.test(id)) {
          // A made-up id gives its place to one that can be a delivery.
          odd.delete(odd.values().next().value!)
          ids.add(shown)
          window.unlisted++
        } else window.unlisted++
      }
      if (window.repeats === 1) arm(at)
    },
    flush() {
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      const at = now()
      for (const [kind, window] of windows) summarize(kind, window, at)
      windows.clear()
      nextEnd = Infinity
    },
  }
}

/** 1999 as "1,999", without Intl (not every edge runtime carries its locale data). */
function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+$)/g, ',')
}

/** Characters that could end a line, forge one, or change how a terminal shows the rest. */
/**
 * Lone UTF-16 surrogates: a log pipeline that encodes UTF-8 would choke on them, and no engine
 * can store them as UTF-8 text (the inbox's and the history's stored texts drop them too).
 */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\\]/g

/**
 * An untrusted string made safe for a log line: control characters, line and paragraph
 * separators, bidirectional overrides and `\` written as escapes (`\n`, `\u2028`), so no string
 * can start a line of its own or pass for another; and capped at `max` characters, `…` marking a cut.
 *
 * @example
 * printable('shop\nsvc-webhooks: 200 processed') // 'shop\\nsvc-webhooks: 200 processed'
 */
export function printable(value: unknown, max = 64): string {
  const text = String(value)
  const capped = text.length > max ? `${text.slice(0, max)}…` : text
  return capped.replace(LONE_SURROGATE, '\uFFFD').replace(UNPRINTABLE, (c) => {
    if (c === '\\') return '\\\\'
    if (c === '\n') return '\\n'
    if (c === '\r') return '\\r'
    if (c === '\t') return '\\t'
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
  })
}

/**
 * What a log line says about an error: its name and code only, never its message. A handler's
 * message may quote the body (a `JSON.parse` SyntaxError quotes its input), so it stays in
 * `onResult` (and, in the inbox, the stored `lastError`).
 *
 * @example
 * errorLabel(new SyntaxError('Unexpected token h in JSON: "hello"')) // 'SyntaxError'
 */
export function errorLabel(error: unknown): string {
  if (!(error instanceof Error)) return typeof error === 'object' && error !== null ? 'a non-Error object' : `a thrown ${typeof error}`
  const code = (error as { code?: unknown }).code
  return `${printable(error.name, 60)}${typeof code === 'string' || typeof code === 'number' ? ` (${printable(code, 40)})` : ''}`
}
