/**
 * `FileSecretSource` (exported by svc-webhooks/service): an endpoint's secrets in a file, for
 * mounted secrets (a Kubernetes Secret volume, Docker secrets) that change without a restart. The
 * file holds the state as JSON, or plain text with one secret per line; it is read again only
 * when its modification time, size or inode changed. `node:fs/promises` is imported inside the
 * calls, so the entry loads in any runtime.
 */
import type { SecretSource, SecretState } from '../secret-source.js'
import { parseState, sourceError, stateText } from '../stores/source-state.js'

/** Options of {@link FileSecretSource}. */
export interface FileSecretSourceOptions {
  /**
   * The file: JSON `{ "secrets": ["svc_whsec_..."], "pendingUntil"?: <ms since the epoch> }`, or
   * plain text with one secret per line (surrounding whitespace and empty lines ignored).
   */
  path: string
}

/** What the file held the last time it was read, and how to tell it changed. */
interface Seen {
  mtimeMs: number
  size: number
  ino: number
  state: SecretState
}

/** The state in a file's text: JSON when it starts with `{`, else one secret per line. */
function stateOf(text: string): SecretState {
  const trimmed = text.trim()
  if (trimmed.startsWith('{')) return parseState(trimmed)
  return { secrets: trimmed.split(/\r?\n/).map((line) => line.trim()).filter((line) => line.length > 0) }
}

/**
 * A secret source in a file. `read()` looks at the file's metadata and reads it again only when
 * it changed (a Kubernetes Secret update swaps the file, so its inode changes); `write()` replaces
 * it atomically (a temporary file beside it, mode 0600, renamed over it), so a reader never sees
 * half a state.
 *
 * @example
 * import { FileSecretSource } from 'svc-webhooks/service'
 * const source = new FileSecretSource({ path: '/var/run/secrets/svc-webhooks/secret' })
 * app.post('/webhooks/svc', webhooks({ secret: source, on }))
 */
export class FileSecretSource implements SecretSource {
  readonly path: string
  private seen: Seen | undefined

  constructor({ path }: FileSecretSourceOptions) {
    if (typeof path !== 'string' || path.length === 0) throw new TypeError('svc-webhooks: FileSecretSource `path` must be a non-empty string.')
    this.path = path
  }

  async read(): Promise<SecretState> {
    const fs = await import('node:fs/promises')
    let changed: Seen | undefined
    try {
      const { mtimeMs, size, ino } = await fs.stat(this.path)
      const seen = this.seen
      if (seen !== undefined && seen.mtimeMs === mtimeMs && seen.size === size && seen.ino === ino) return seen.state
      // Metadata and text from one open file, so a swap in between cannot pair one file's text with another's metadata.
      const handle = await fs.open(this.path, 'r')
      try {
        const stat = await handle.stat()
        const text = await handle.readFile('utf8')
        changed = { mtimeMs: stat.mtimeMs, size: stat.size, ino: stat.ino, state: stateOf(text) }
      } finally {
        await handle.close()
      }
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code
      throw sourceError(`FileSecretSource: the file ${JSON.stringify(this.path)} could not be read${typeof code === 'string' ? ` (${code})` : ''}.`, error)
    }
    this.seen = changed
    return changed.state
  }

  async write(state: SecretState): Promise<void> {
    const text = stateText(state, 'FileSecretSource')
    const fs = await import('node:fs/promises')
    const temporary = `${this.path}.${crypto.randomUUID()}.tmp`
    try {
      await fs.writeFile(temporary, text, { mode: 0o600, flag: 'wx' })
      await fs.rename(temporary, this.path)
    } catch (error) {
      await fs.rm(temporary, { force: true }).catch(() => undefined)
      const code = (error as { code?: unknown } | null)?.code
      throw sourceError(`FileSecretSource: the file ${JSON.stringify(this.path)} could not be written${typeof code === 'string' ? ` (${code})` : ''}.`, error)
    }
    this.seen = undefined
  }
}
