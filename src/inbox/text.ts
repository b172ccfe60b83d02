/**
 * Text the inbox worker writes somewhere: what it stores (an error passed to `retry`/`bury`, kept
 * as the entry's `lastError`) must be storable by every engine, and what it prints in a log line
 * must not let an untrusted value (an endpoint name from a URL, an event type, an error's name)
 * forge lines or grow without bound.
 */

/** Lone UTF-16 surrogates: no engine can encode them as UTF-8 text. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g
/** C0 and C1 controls, DEL and the two Unicode line separators: what starts a new line in a log viewer. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g
// eslint-disable-next-line no-control-regex
const NUL = /\u0000/g

/** The longest error text stored with an entry. */
export const MAX_STORED_ERROR = 2000

/**
 * `text` as every engine can store it: U+0000 removed (Postgres `text` refuses it), lone
 * surrogates removed (not encodable as UTF-8), at most `max` characters.
 *
 * @example
 * await inbox.retry(entry, delay, storable(`${error.name}: ${error.message}`))
 */
export function storable(text: string, max = MAX_STORED_ERROR): string {
  // Cut first, so a cut through a surrogate pair leaves a lone half that is then removed.
  const capped = text.length > max ? `${text.slice(0, max - 3)}...` : text
  return capped.replace(NUL, '').replace(LONE_SURROGATE, '')
}

/**
 * `value` as one safe piece of a log line: control characters and line separators escaped
 * (`\u000a`), lone surrogates replaced, at most `max` characters.
 *
 * @example
 * log(`delivery ${printable(entry.id)} (endpoint ${printable(entry.endpoint)})`)
 */
export function printable(value: unknown, max = 120): string {
  const text = String(value)
  const capped = text.length > max ? `${text.slice(0, max)}...` : text
  return capped.replace(LONE_SURROGATE, '\uFFFD').replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * What a log line says about an error: its name and code only, never its message. A handler's
 * message may quote the body (a `JSON.parse` SyntaxError quotes its input), so it stays in
 * `onResult` and in the stored `lastError`.
 *
 * @example
 * errorLabel(new SyntaxError('Unexpected token h in JSON: "hello"')) // 'SyntaxError'
 */
export function errorLabel(error: unknown): string {
  if (!(error instanceof Error)) return typeof error === 'object' && error !== null ? 'a non-Error object' : `a thrown ${typeof error}`
  const code = (error as { code?: unknown }).code
  return `${printable(error.name, 60)}${typeof code === 'string' || typeof code === 'number' ? ` (${printable(code, 40)})` : ''}`
}

/** `error` as the text stored with an entry: name and message, storable. */
export function storedError(error: unknown): string {
  try {
    return storable(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
  } catch {
    // An object whose toString throws, or a revoked proxy.
    return 'an error that cannot be turned into text'
  }
}
