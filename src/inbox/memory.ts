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
  type FilingInbox,
  type InboxDelivery,
  type InboxEntry,
  type InboxOptions,
  type InboxStats,
  type WebhookInbox,
} from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import type { Admission, FlowEngine, ModeEngine, OrderedEntry, OrderedTake, OrderedTakeOptions, OrderingEngine, PauseState, Placement, WorkerMode } from '../contracts/ordering.js'
import { filingOf, filingToStore, readOrdering, type InboxOrderingOption, type Ordering } from './ordering.js'
import { TokenBucket } from './token-bucket.js'
import { flowStats } from './flow-stats.js'

/** Unplaced deliveries handed out to be placed per ordered take. */
const PLACE_BATCH = 200

interface Held {
  delivery: InboxDelivery
  attempts: number
  takes: number
  retriesSince: number
  lastError?: string
  dueAt: number
  lease?: string
  leaseUntil: number
  /** Placed under a key (ordering): the key, its order text, and whether a failure holds the key. */
  placed?: { key: string; order: string; strict: boolean }
  /** Leased to be placed, not to run. */
  placing?: boolean
  /** Where its append filed it (the inbox's `ordering`): placed by an ordered take without a worker. */
  filed?: { key: string; order: string }
}

/** Options of {@link MemoryInbox}. */
export interface MemoryInboxOptions extends InboxOptions, InboxOrderingOption {}

/** A key's deliveries in run order, who runs its head, and the highest order completed. */
interface KeyState {
  members: Held[]
  holder?: { held: Held; lease: string }
  last?: string
}

/**
 * An inbox in memory (not durable).
 *
 * @example
 * const inbox = new MemoryInbox()
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 */
export class MemoryInbox implements WebhookInbox, OrderingEngine, FlowEngine, ModeEngine, FilingInbox {
  /** The `ordering` option, read: appends file each delivery, and workers on this inbox run with it. */
  readonly ordering: Ordering | undefined
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
  private readonly ordered = new Map<string, KeyState>()
  private pause: PauseState = { paused: false, version: 0 }
  private readonly bucket = new TokenBucket()
  /** The running workers' modes: `mode worker` → until when (src/inbox/worker-mode.ts). */
  private readonly modes = new Map<string, { mode: WorkerMode; until: number }>()

  constructor({ retentionMs = DEFAULT_RETENTION_MS, now = Date.now, ordering }: MemoryInboxOptions = {}) {
    if (!(retentionMs > 0)) throw new TypeError('svc-webhooks: MemoryInbox `retentionMs` must be a positive number.')
    this.retentionMs = retentionMs
    this.now = now
    this.ordering = readOrdering(ordering, 'MemoryInbox')
  }

  fileAt(event: unknown, delivery: Pick<InboxDelivery, 'keys' | 'receivedAt'>): { key: string; order: string } | undefined {
    return this.ordering && filingOf(this.ordering, event, delivery)
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
    const now = this.now()
    for (const key of delivery.keys) {
      const expiresAt = this.keys.get(key)
      if (expiresAt !== undefined && expiresAt > now) return 'duplicate'
    }
    for (const key of delivery.keys) this.keys.set(key, Infinity)
    this.acks.delete(delivery.keys[0]!)
    const filed = filingToStore(this.ordering, delivery)
    this.entries.set(delivery.keys[0]!, { delivery: { ...delivery, keys: [...delivery.keys] }, attempts: 0, takes: 0, retriesSince: delivery.receivedAt, dueAt: now, leaseUntil: 0, ...(filed && { filed }) })
    return 'accepted'
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    const now = this.now()
    const taken: InboxEntry[] = []
    for (const held of this.entries.values()) {
      if (taken.length >= max) break
      if (held.dueAt > now || held.leaseUntil > now || held.placed) continue
      held.placing = false
      taken.push(this.leaseToRun(held, now + visibilityMs))
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
    if (held.placed) {
      const state = this.ordered.get(held.placed.key)
      if (state && (state.last === undefined || held.placed.order > state.last)) state.last = held.placed.order
    }
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

  async takeOrdered(max: number, visibilityMs: number, { placeLeaseMs, filed }: OrderedTakeOptions): Promise<OrderedTake> {
    const now = this.now()
    const place: InboxEntry[] = []
    let busy = false
    for (const held of this.entries.values()) {
      if (held.placed) continue
      if (held.placing && held.leaseUntil > now) busy = true
      if (held.dueAt > now || held.leaseUntil > now) continue
      if (filed && held.filed) {
        // Filed at append by this ordering: placed here, no worker needed.
        this.file(held, held.filed.key, held.filed.order, filed.strict)
        continue
      }
      if (place.length >= PLACE_BATCH) continue
      held.lease = `m${++this.leases}`
      held.leaseUntil = now + placeLeaseMs
      held.placing = true
      place.push(this.entryOf(held))
    }
    if (place.length > 0 || busy) return { place, run: [], busy: place.length === 0 }
    const run: OrderedEntry[] = []
    for (const [key, state] of this.ordered) {
      if (run.length >= max) break
      const holder = state.holder
      if (holder && holder.held.lease === holder.lease && holder.held.leaseUntil > now && this.entries.get(holder.held.delivery.keys[0]!) === holder.held) continue
      // Deliveries completed, buried or requeued (placed again) since leave the key.
      state.members = state.members.filter((held) => this.entries.get(held.delivery.keys[0]!) === held && held.placed?.key === key)
      if (state.members.length === 0) {
        if (state.last === undefined) this.ordered.delete(key)
        continue
      }
      const head = state.members.find((held) => held.dueAt <= now && held.leaseUntil <= now)
      // Strict: the first in order holds the key until it is due (or gone); otherwise the first due.
      if (head === undefined || (head !== state.members[0] && state.members[0]!.placed!.strict)) continue
      const entry = this.leaseToRun(head, now + visibilityMs)
      state.holder = { held: head, lease: entry.lease }
      run.push({ ...entry, orderKey: key, late: state.last !== undefined && head.placed!.order < state.last })
    }
    return { place: [], run, busy: false }
  }

  async place(placements: readonly Placement[]): Promise<boolean[]> {
    const now = this.now()
    return placements.map(({ entry, key, order, strict }) => {
      const held = this.entries.get(entry.keys[0]!)
      if (!held || !held.placing || held.lease !== entry.lease || held.leaseUntil <= now) return false
      this.file(held, key, order, strict)
      return true
    })
  }

  /** Places `held` under `key`, in order. */
  private file(held: Held, key: string, order: string, strict: boolean): void {
    held.placing = false
    held.lease = undefined
    held.leaseUntil = 0
    held.placed = { key, order, strict }
    let state = this.ordered.get(key)
    if (!state) this.ordered.set(key, (state = { members: [] }))
    const at = state.members.findIndex((other) => other.placed !== undefined && other.placed.order > order)
    state.members.splice(at === -1 ? state.members.length : at, 0, held)
  }

  async admit(want: number, rate?: { perSecond: number; burst: number }): Promise<Admission> {
    const pause = { ...this.pause }
    if (pause.paused) return { granted: 0, waitMs: 0, pause }
    if (!rate) return { granted: want, waitMs: 0, pause }
    return { ...this.bucket.take(want, rate.perSecond, rate.burst, this.now()), pause }
  }

  async refund(tokens: number, rate: { perSecond: number; burst: number }): Promise<void> {
    this.bucket.refund(tokens, rate.burst)
  }

  async setPause(paused: boolean, by?: string, expected?: number): Promise<PauseState | undefined> {
    if (expected !== undefined && expected !== this.pause.version) return undefined
    this.pause = paused ? { paused, ...(by !== undefined && { by }), since: this.now(), version: this.pause.version + 1 } : { paused, version: this.pause.version + 1 }
    return { ...this.pause }
  }

  async flow(): Promise<{ pause: PauseState; perSecond?: number }> {
    return { pause: { ...this.pause }, ...(this.bucket.perSecond !== undefined && { perSecond: this.bucket.perSecond }) }
  }

  async claimMode(mode: WorkerMode, worker: string, ttlMs: number): Promise<boolean> {
    const now = this.now()
    for (const [id, mark] of this.modes) if (mark.until < now) this.modes.delete(id)
    for (const mark of this.modes.values()) if (mark.mode !== mode) return false
    this.modes.set(`${mode} ${worker}`, { mode, until: now + ttlMs })
    return true
  }

  async releaseMode(mode: WorkerMode, worker: string): Promise<void> {
    this.modes.delete(`${mode} ${worker}`)
  }

  /** Leases `held` to run until `until`: one more take. */
  private leaseToRun(held: Held, until: number): InboxEntry {
    held.lease = `m${++this.leases}`
    held.leaseUntil = until
    held.takes++
    return this.entryOf(held)
  }

  private entryOf(held: Held): InboxEntry {
    return { ...held.delivery, attempts: held.attempts, takes: held.takes, retriesSince: held.retriesSince, lease: held.lease!, ...(held.lastError !== undefined ? { lastError: held.lastError } : {}) }
  }

  async stats(): Promise<InboxStats> {
    const now = this.now()
    let oldest = now
    let retrying = 0
    for (const held of this.entries.values()) {
      if (held.delivery.receivedAt < oldest) oldest = held.delivery.receivedAt
      if (held.attempts > 0) retrying++
    }
    return { depth: this.entries.size, oldestAgeMs: now - oldest, retrying, dead: this.buried.size, ...flowStats(await this.flow()) }
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
