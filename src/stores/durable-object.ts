/**
 * The Durable Object idempotency store for Cloudflare Workers: every dedupe key lives in its own
 * Durable Object (`idFromName(key)`), and a Durable Object runs one event at a time with its
 * storage input-gated, so claim, complete and release are atomic across all of a Worker's
 * instances and locations. Expiry (lease, retention) is an alarm that deletes the record.
 * Workers KV is eventually consistent: two isolates can both read "absent", so it is never a store.
 * Talks to the object over its `fetch` interface: it needs no `cloudflare:workers` import.
 */
import type { ClaimResult, IdempotencyStore } from '../contracts/store.js'

/** The parts of a `DurableObjectNamespace` binding the store uses (structural: no workers-types needed). */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown
  get(id: never): { fetch(input: string, init?: RequestInit): Promise<Response> }
}

/** The parts of a `DurableObjectState` the object uses. */
export interface DurableObjectStateLike {
  storage: {
    get<T>(key: string): Promise<T | undefined>
    put<T>(key: string, value: T): Promise<void>
    deleteAll(): Promise<void>
    setAlarm(scheduledTime: number): Promise<void>
    deleteAlarm(): Promise<void>
  }
}

type Op = { op: 'claim'; owner: string; ms: number } | { op: 'complete'; owner: string; ms: number } | { op: 'release'; owner: string }

/** One key's record: claimed by `owner` until `expiresAt`, or completed until `expiresAt`. */
interface KeyRecord {
  state: 'claimed' | 'completed'
  owner: string
  expiresAt: number
}

const RECORD = 'record'
// The stub's URL is never resolved on the network: it only names the request for the object.
const OBJECT_URL = 'https://svc-webhooks.durable-object/'

/**
 * The Durable Object class behind {@link DurableObjectStore}. Export it from your Worker's main
 * module and bind it in wrangler.toml (see the README's Cloudflare section).
 *
 * @example
 * export { WebhookIdempotencyObject } from 'svc-webhooks/cloudflare'
 * // wrangler.toml: [[durable_objects.bindings]] name = "WEBHOOK_IDEMPOTENCY", class_name = "WebhookIdempotencyObject"
 */
export class WebhookIdempotencyObject {
  /**
   * Type only, nothing at run time: what @cloudflare/workers-types' `Rpc.DurableObjectBranded`
   * asks of a class a `DurableObjectNamespace<T>` names (the type `wrangler types` writes for the
   * binding), without importing `cloudflare:workers`, which Node.js cannot load.
   */
  declare readonly __DURABLE_OBJECT_BRAND: never

  constructor(
    private readonly state: DurableObjectStateLike,
    _env?: unknown,
  ) {}

  async fetch(request: Request): Promise<Response> {
    const op = (await request.json()) as Op
    return Response.json({ result: await this.apply(op) })
  }

  /** Deletes the record once its lease or retention has passed (an unreleased claim of a crashed request, too). */
  async alarm(): Promise<void> {
    const { storage } = this.state
    const record = await storage.get<KeyRecord>(RECORD)
    if (record === undefined || record.expiresAt <= Date.now()) await storage.deleteAll()
    else await storage.setAlarm(record.expiresAt)
  }

  // No await between reading and writing but storage calls: the input gate keeps other events out.
  private async apply(op: Op): Promise<ClaimResult | boolean> {
    const { storage } = this.state
    const record = await storage.get<KeyRecord>(RECORD)
    const now = Date.now()
    const live = record !== undefined && record.expiresAt > now
    const owned = live && record.state === 'claimed' && record.owner === op.owner
    if (op.op === 'release') {
      if (!owned) return false
      await storage.deleteAll()
      await storage.deleteAlarm()
      return true
    }
    if (op.op === 'claim' && live) return record.state === 'completed' ? 'completed' : 'in_flight'
    const next: KeyRecord = { state: op.op === 'claim' ? 'claimed' : 'completed', owner: op.owner, expiresAt: now + op.ms }
    await storage.put(RECORD, next)
    await storage.setAlarm(next.expiresAt)
    return op.op === 'claim' ? 'claimed' : owned
  }
}

/** Options of {@link DurableObjectStore}. */
export interface DurableObjectStoreOptions {
  /**
   * Put before every key, so two stores can share one namespace. The receiver's `endpoint`
   * already keeps two endpoints apart.
   * @default ''
   */
  prefix?: string
}

/**
 * An {@link IdempotencyStore} over a `WebhookIdempotencyObject` namespace binding: atomic across
 * every instance of your Worker. A failing or unreachable object makes the receiver answer 503.
 *
 * @example
 * export default withWebhooks((env: Env) => ({
 *   store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY),
 *   on: { 'message.received': async (event) => { await env.DB.prepare('insert ...').run() } },
 * }))
 */
export class DurableObjectStore implements IdempotencyStore {
  private readonly prefix: string

  constructor(
    private readonly namespace: DurableObjectNamespaceLike,
    { prefix = '' }: DurableObjectStoreOptions = {},
  ) {
    if (typeof namespace?.idFromName !== 'function' || typeof namespace.get !== 'function') {
      throw new TypeError('svc-webhooks: DurableObjectStore needs a Durable Object namespace binding (env.WEBHOOK_IDEMPOTENCY), bound to WebhookIdempotencyObject.')
    }
    this.prefix = prefix
  }

  claim(key: string, owner: string, leaseMs: number): Promise<ClaimResult> {
    return this.send(key, { op: 'claim', owner, ms: leaseMs }) as Promise<ClaimResult>
  }

  complete(key: string, owner: string, retentionMs: number): Promise<boolean> {
    return this.send(key, { op: 'complete', owner, ms: retentionMs }) as Promise<boolean>
  }

  release(key: string, owner: string): Promise<boolean> {
    return this.send(key, { op: 'release', owner }) as Promise<boolean>
  }

  private async send(key: string, op: Op): Promise<ClaimResult | boolean> {
    const stub = this.namespace.get(this.namespace.idFromName(this.prefix + key) as never)
    const response = await stub.fetch(OBJECT_URL, { method: 'POST', body: JSON.stringify(op) })
    if (!response.ok) throw new Error(`svc-webhooks: the idempotency Durable Object answered ${response.status}.`)
    return ((await response.json()) as { result: ClaimResult | boolean }).result
  }
}
