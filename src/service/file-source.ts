/**
 * `FileSecretSource` (exported by svc-webhooks/service): an endpoint's secrets in a file, for
 * mounted secrets (a Kubernetes Secret volume, Docker secrets) that change without a restart. The
 * file holds the state as JSON, or plain text with one secret per line; it is read again only
 * when its modification time, size or inode changed. `node:fs/promises` is imported inside the
 * calls, so the entry loads in any runtime.
 */
import type { SecretSource, SecretState, SecretWriteCondition } from '../secrets/index.js'
import { expectedVersion, parseState, SOURCE_ERROR, sourceError, stateText } from '../stores/source-state.js'

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

/** How long a writer waits for the lock beside the file, and the age past which a lock is taken as left by a crashed writer. */
const LOCK_WAIT_MS = 2000
const STALE_LOCK_MS = 10_000

/**
 * A secret source in a file. `read()` looks at the file's metadata and reads it again only when
 * it changed (a Kubernetes Secret update swaps the file, so its inode changes); `write()` replaces
 * it atomically (a temporary file beside it, mode 0600, renamed over it), so a reader never sees
 * half a state, and stores a `version` with it. `write(state, { version })` writes only if the file
 * still holds that version: the check and the rename are made under a lock file beside it
 * (`<path>.lock`, created exclusively), so two writers on one machine or one shared file system
 * never both pass the check.
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
      throw sourceError(`FileSecretSource: the file ${JSON.stringify(this.path)} could not be read${typeof code === 'string' ? ` (${code})` : ''}.`, error, code === 'ENOENT')
    }
    this.seen = changed
    return changed.state
  }

  /** Stores `state`; with `condition`, only if the file still holds `condition.version`. Resolves whether it wrote. */
  async write(state: SecretState, condition?: SecretWriteCondition): Promise<boolean> {
    const body = stateText(state, 'FileSecretSource')
    const expected = expectedVersion(condition, 'FileSecretSource')
    const fs = await import('node:fs/promises')
    const lock = `${this.path}.lock`
    const temporary = `${this.path}.${crypto.randomUUID()}.tmp`
    try {
      await this.lock(fs, lock)
      try {
        const version = await this.storedVersion(fs)
        if (expected !== undefined && expected !== version) return false
        await fs.writeFile(temporary, `{"version":${version + 1},${body.slice(1)}`, { mode: 0o600, flag: 'wx' })
        await fs.rename(temporary, this.path)
      } finally {
        await fs.rm(lock, { force: true }).catch(() => undefined)
      }
    } catch (error) {
      await fs.rm(temporary, { force: true }).catch(() => undefined)
      if ((error as { name?: unknown } | null)?.name === SOURCE_ERROR) throw error
      const code = (error as { code?: unknown } | null)?.code
      throw sourceError(`FileSecretSource: the file ${JSON.stringify(this.path)} could not be written${typeof code === 'string' ? ` (${code})` : ''}.`, error)
    } finally {
      this.seen = undefined
    }
    return true
  }

  /** The version the file holds now: 0 when it is missing, plain text, or written without one. */
  private async storedVersion(fs: typeof import('node:fs/promises')): Promise<number> {
    let text: string
    try {
      text = await fs.readFile(this.path, 'utf8')
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === 'ENOENT') return 0
      throw error
    }
    const state = stateOf(text) as { version?: unknown }
    return typeof state === 'object' && state !== null && Number.isSafeInteger(state.version) ? (state.version as number) : 0
  }

  /** Takes the lock file, waiting at most {@link LOCK_WAIT_MS}; a lock older than {@link STALE_LOCK_MS} was left by a crashed writer. */
  private async lock(fs: typeof import('node:fs/promises'), lock: string): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS
    for (let round = 0; ; round++) {
      try {
        await (await fs.open(lock, 'wx', 0o600)).close()
        return
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== 'EEXIST') throw error
      }
      const age = await fs.stat(lock).then((stat) => Date.now() - stat.mtimeMs, () => 0)
      if (age > STALE_LOCK_MS) await fs.rm(lock, { force: true })
      else if (Date.now() > deadline || round > 1000) {
        throw sourceError(`FileSecretSource: another writer held ${JSON.stringify(lock)} for over ${LOCK_WAIT_MS} ms; nothing was written.`)
      } else await new Promise((done) => setTimeout(done, 5 + Math.random() * 10))
    }
  }
}
