/**
 * `MemoryInbox`: the inbox in this process's memory, for tests, demos and a single process that
 * can afford to lose what is queued. **Not durable**: a restart loses every accepted delivery the
 * workers had not finished, after the sender was told 202. Use `RedisInbox` or `PostgresInbox`
 * in production. Acks are idempotent per lease, as on every engine: the lease of each delivery's
 * last complete, retry or bury is kept, so the same ack repeated answers true again.
 */
import {
  type AppendResult,
  type DeadLetter,
  type InboxDelivery,
  type InboxEntry,
  type InboxOptions,
  type InboxStats,
  type WebhookInbox,
} from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'

interface Held {
  delivery: InboxDelivery
  attempts: number
  takes: number
  retriesSince: number
  lastError?: string
  dueAt: number
  lease?: string
  leaseUntil: number
}

/**
 * An inbox in memory (not durable).
 *
 * @example
 * const inbox = new MemoryInbox()
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 */
export class MemoryInbox implements WebhookInbox {
  private readonly retentionMs: number
  private readonly now: () => number
  /** Keys accepted (expiry Infinity until processed) or processed (expiry set). */
  private readonly keys = new Map<string, number>()
  private readonly entries = new Map<string, Held>()
  private readonly buried = new Map<string, DeadLetter>()
  /** By primary key: the lease of the last complete, retry or bury, and which it was. */
  private readonly acks = new Map<string, { lease: string; ack: 'complete' | 'retry' | 'bury' }>()
  private leases = 0
  private completions = 0

  constructor({ retentionMs = DEFAULT_RETENTION_MS, now = Date.now }: InboxOptions = {}) {
    if (!(retentionMs > 0)) throw new TypeError('svc-webhooks: MemoryInbox `retentionMs` must be a positive number.')
    this.retentionMs = retentionMs
    this.now = now
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
    const now = this.now()
    for (const key of delivery.keys) {
      const expiresAt = this.keys.get(key)
      if (expiresAt !== undefined && expiresAt > now) return 'duplicate'
    }
    for (const key of delivery.keys) this.keys.set(key, Infinity)
    this.acks.delete(delivery.keys[0]!)
    this.entries.set(delivery.keys[0]!, { delivery: { ...delivery, keys: [...delivery.keys] }, attempts: 0, takes: 0, retriesSince: delivery.receivedAt, dueAt: now, leaseUntil: 0 })
    return 'accepted'
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    const now = this.now()
    const taken: InboxEntry[] = []
    for (const held of this.entries.values()) {
      if (taken.length >= max) break
      if (held.dueAt > now || held.leaseUntil > now) continue
      held.lease = `m${++this.leases}`
      held.leaseUntil = now + visibilityMs
      held.takes++
      taken.push({ ...held.delivery, attempts: held.attempts, takes: held.takes, retriesSince: held.retriesSince, lease: held.lease, ...(held.lastError !== undefined ? { lastError: held.lastError } : {}) })
    }
    return taken
  }

  private holder(entry: InboxEntry): Held | undefined {
    const held = this.entries.get(entry.keys[0]!)
    return held !== undefined && held.lease === entry.lease && held.leaseUntil > this.now() ? held : undefined
  }

  /** Whether `entry`'s lease already made this ack (a repeat answers true, as on every engine). */
  private repeated(entry: InboxEntry, ack: 'complete' | 'retry' | 'bury'): boolean {
    const last = this.acks.get(entry.keys[0]!)
    return last !== undefined && last.lease === entry.lease && last.ack === ack
  }

  async complete(entry: InboxEntry): Promise<boolean> {
    const held = this.holder(entry)
    if (!held) return this.repeated(entry, 'complete')
    this.acks.set(entry.keys[0]!, { lease: entry.lease, ack: 'complete' })
    this.entries.delete(entry.keys[0]!)
    const expiresAt = this.now() + this.retentionMs
    for (const key of held.delivery.keys) this.keys.set(key, expiresAt)
    this.prune()
    return true
  }

  async retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean> {
    const held = this.holder(entry)
    if (!held) return this.repeated(entry, 'retry')
    this.acks.set(entry.keys[0]!, { lease: entry.lease, ack: 'retry' })
    held.attempts++
    held.lastError = error
    held.dueAt = this.now() + delayMs
    held.lease = undefined
    held.leaseUntil = 0
    return true
  }

  async bury(entry: InboxEntry, error: string): Promise<boolean> {
    const held = this.holder(entry)
    if (!held) return this.repeated(entry, 'bury')
    this.acks.set(entry.keys[0]!, { lease: entry.lease, ack: 'bury' })
    this.entries.delete(entry.keys[0]!)
    this.buried.set(entry.keys[0]!, { ...held.delivery, attempts: held.attempts + 1, takes: held.takes, lastError: error, deadAt: this.now() })
    return true
  }

  async extend(entry: InboxEntry, visibilityMs: number): Promise<boolean> {
    const held = this.holder(entry)
    if (!held) return false
    held.leaseUntil = this.now() + visibilityMs
    return true
  }

  async dead(limit = 100): Promise<DeadLetter[]> {
    return [...this.buried.values()].slice(0, limit)
  }

  async requeue(key: string): Promise<boolean> {
    const letter = this.buried.get(key)
    if (!letter) return false
    this.buried.delete(key)
    this.acks.delete(key)
    const { attempts: _attempts, takes: _takes, lastError: _lastError, deadAt: _deadAt, ...delivery } = letter
    const now = this.now()
    this.entries.set(key, { delivery, attempts: 0, takes: 0, retriesSince: now, dueAt: now, leaseUntil: 0 })
    return true
  }

  async purge(key: string): Promise<boolean> {
    const letter = this.buried.get(key)
    if (!letter) return false
    this.buried.delete(key)
    const expiresAt = this.now() + this.retentionMs
    for (const k of letter.keys) this.keys.set(k, expiresAt)
    return true
  }

  async stats(): Promise<InboxStats> {
    const now = this.now()
    let oldest = now
    let retrying = 0
    for (const held of this.entries.values()) {
      if (held.delivery.receivedAt < oldest) oldest = held.delivery.receivedAt
      if (held.attempts > 0) retrying++
    }
    return { depth: this.entries.size, oldestAgeMs: now - oldest, retrying, dead: this.buried.size }
  }

  /** Forgets processed keys past their retention: a full scan once every 1000 completions. */
  private prune(): void {
    if (++this.completions % 1000 !== 0) return
    const now = this.now()
    for (const [key, expiresAt] of this.keys) {
      if (expiresAt > now) continue
      this.keys.delete(key)
      this.acks.delete(key)
    }
  }
}
