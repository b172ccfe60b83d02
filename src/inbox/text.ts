/**
 * Text the inbox worker stores: an error passed to `retry`/`bury`, kept as the entry's
 * `lastError`, must be storable by every engine. (What it prints goes through log-window.ts.)
 */
import { LONE_SURROGATE } from '../log-window.js'

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

/** `error` as the text stored with an entry: name and message, storable. */
export function storedError(error: unknown): string {
  try {
    return storable(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
  } catch {
    // An object whose toString throws, or a revoked proxy.
    return 'an error that cannot be turned into text'
  }
}
