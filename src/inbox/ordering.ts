/**
 * The worker's side of order within a conversation (DESIGN.md "Order within a conversation"):
 * the `ordering` option, `byConversation`, a delivery's order text, and the ordered take that
 * places new deliveries under their key before any head of a key is run. The engines keep the
 * shared state (src/contracts/ordering.ts); this file keeps the policy. An inbox given the
 * `ordering` too files each delivery at append (`filingOf`), so the take places it without a
 * worker; a delivery appended without one is placed by a worker.
 */
import { decodeUtf8 } from '#crypto'
import type { WebhookEvent } from '../events.js'
import type { InboxDelivery, InboxEntry } from '../contracts/inbox.js'
import { isOrderingEngine, type OrderedEntry, type OrderingEngine, type Placement } from '../contracts/ordering.js'

/**
 * The key of an event: deliveries with the same key run one at a time, in `message.created_at`
 * order. `undefined` means "no order" for that event; anything else that is not a string (or a
 * throw) is that delivery's failure: retried, then dead-lettered with the reason.
 */
export type OrderingKey = (event: WebhookEvent) => string | undefined

/** The worker's `ordering` option: a key function, or one with `strict`. */
export type OrderingOption =
  | OrderingKey
  | {
      key: OrderingKey
      /**
       * A failing delivery holds the later ones of its key until it succeeds or is dead-lettered
       * (true), or lets them pass and runs when its retry is due, marked `late` (false).
       * @default true
       */
      strict?: boolean
    }

/**
 * `message.received` keyed by its `conversation_id` (spec §6.1); other events unordered.
 *
 * @example
 * createInboxWorker({ inbox, ordering: byConversation, on: { 'message.received': reply } })
 */
export const byConversation: OrderingKey = (event) =>
  event.event === 'message.received' ? ((event as { conversation_id?: unknown }).conversation_id as string) : undefined

/** The `ordering` option of MemoryInbox, RedisInbox and PostgresInbox. */
export interface InboxOrderingOption {
  /**
   * The worker's `ordering` (a key function such as `byConversation`, or `{ key, strict }`), given
   * to the inbox instead: every receiver appending to it files each delivery under its key and
   * order at once, so an ordered take places it without handing its body to a worker, and every
   * worker on it runs ordered. Give every process's inbox the same ordering. PostgresInbox: the
   * filing is kept in columns of this version, so run its `ensureTable()` (or
   * `createInboxTableSql()`) first; an inbox without `ordering` appends as before.
   * @default none
   */
  ordering?: OrderingOption
}

/** The resolved option. */
export interface Ordering {
  key: OrderingKey
  strict: boolean
}

/** Reads an `ordering` option (`where` names it in the TypeError when it is not one). */
export function readOrdering(option: OrderingOption | undefined, where: string): Ordering | undefined {
  if (option === undefined) return undefined
  const key = typeof option === 'function' ? option : option?.key
  if (typeof key !== 'function') throw new TypeError(`svc-webhooks: ${where} \`ordering\` must be a key function of the event (e.g. byConversation) or { key, strict }.`)
  const strict = typeof option === 'function' ? true : option.strict ?? true
  if (typeof strict !== 'boolean') throw new TypeError(`svc-webhooks: ${where} \`ordering.strict\` must be a boolean.`)
  return { key, strict }
}

/**
 * The worker's ordering: its own option, else its inbox's (`new RedisInbox({ ordering })`); a
 * TypeError when it is not one, when the two differ, or when the engine cannot keep order.
 */
export function resolveOrdering(option: OrderingOption | undefined, inbox: unknown): Ordering | undefined {
  const own = readOrdering(option, 'createInboxWorker')
  const filing = (inbox as { ordering?: Ordering } | undefined)?.ordering
  if (own && filing && (own.key !== filing.key || own.strict !== filing.strict)) {
    throw new TypeError(
      'svc-webhooks: createInboxWorker `ordering` differs from its inbox\'s `ordering`: the receivers file deliveries under the inbox\'s key function. Give the ordering once, to the inbox (the worker takes it from there).',
    )
  }
  const ordering = own ?? filing
  if (ordering === undefined) return undefined
  if (!isOrderingEngine(inbox)) {
    throw new TypeError(
      'svc-webhooks: createInboxWorker `ordering` needs an inbox that keeps order across worker processes (MemoryInbox, RedisInbox, PostgresInbox); this inbox cannot, and running it unordered would break the order you asked for.',
    )
  }
  return ordering
}

const MICROS_WIDTH = 17
const RECEIVED_WIDTH = 15
/** Text an order starts with, so `<order>|<primary key>` can be cut after it. */
export const ORDER_WIDTH = MICROS_WIDTH + 1 + RECEIVED_WIDTH

const pad = (value: number, width: number): string => String(Math.max(0, Math.floor(value))).padStart(width, '0').slice(-width)

/** `created_at` (ISO 8601, microseconds and offset) in microseconds since the epoch, or undefined. */
function microsOf(createdAt: unknown): number | undefined {
  if (typeof createdAt !== 'string') return undefined
  // Date.parse keeps milliseconds only: the sender's microseconds are read apart.
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)?$/i.exec(createdAt.trim())
  if (!match) return undefined
  const seconds = Date.parse(`${match[1]}${match[3] ?? 'Z'}`)
  if (!Number.isFinite(seconds)) return undefined
  const micros = Number((match[2] ?? '').padEnd(6, '0').slice(0, 6))
  return seconds * 1000 + micros
}

/**
 * The order of a delivery as fixed-width text (byte order is run order): the message's
 * `created_at` in microseconds, then the time received. An event without a readable
 * `message.created_at` is ordered by the time received alone.
 */
export function orderOf(event: WebhookEvent | undefined, receivedAt: number): string {
  const created = microsOf((event as { message?: { created_at?: unknown } } | undefined)?.message?.created_at) ?? receivedAt * 1000
  return `${pad(created, MICROS_WIDTH)}.${pad(receivedAt, RECEIVED_WIDTH)}`
}

/** What the key of a delivery placed alone starts with. */
const ALONE = '\u0000alone:'
/** The key of a delivery whose own key is unknown (the function failed, the body is corrupt, or no order was asked): alone under it. */
const aloneKey = (entry: InboxEntry): string => `${ALONE}${entry.keys[0]}`

/** What the key function made of an event: a key, no order, or a failure with its reason. */
type KeyResult = { key: string } | { key: undefined } | { error: Error }

function parse(entry: Pick<InboxDelivery, 'rawBody'>): WebhookEvent | undefined {
  try {
    const event = JSON.parse(decodeUtf8(entry.rawBody)) as unknown
    return typeof event === 'object' && event !== null ? (event as WebhookEvent) : undefined
  } catch {
    return undefined
  }
}

function keyOf(ordering: Ordering, event: WebhookEvent): KeyResult {
  let key: unknown
  try {
    key = ordering.key(event)
  } catch (error) {
    const name = error instanceof Error ? error.name : typeof error
    return { error: Object.assign(new Error(`the ordering key function threw (${name})`), { name: 'OrderingKeyError', cause: error }) }
  }
  if (key === undefined) return { key: undefined }
  if (typeof key !== 'string') return { error: Object.assign(new Error(`the ordering key function returned ${key === null ? 'null' : typeof key}, not a string or undefined`), { name: 'OrderingKeyError' }) }
  return { key }
}

/**
 * Where a delivery is filed at append (`InboxDelivery.filed`) by the inbox's `ordering`: its key
 * (a delivery without one alone under its own) and its order. Undefined when the key function
 * fails or the body is not an event: a worker places that one, and reports the failure.
 */
export function filingOf(ordering: Ordering, event: unknown, delivery: Pick<InboxDelivery, 'keys' | 'receivedAt'>): { key: string; order: string } | undefined {
  if (typeof event !== 'object' || event === null) return undefined
  const result = keyOf(ordering, event as WebhookEvent)
  if ('error' in result) return undefined
  return { key: result.key ?? `${ALONE}${delivery.keys[0]}`, order: orderOf(event as WebhookEvent, delivery.receivedAt) }
}

/**
 * What an engine's append stores to file `delivery`: what the receiver computed, else the same
 * from its body when the inbox has an `ordering`; undefined without one.
 */
export function filingToStore(ordering: Ordering | undefined, delivery: InboxDelivery): { key: string; order: string } | undefined {
  if (ordering === undefined) return undefined
  const filed = delivery.filed
  if (filed !== undefined) return typeof filed.key === 'string' && typeof filed.order === 'string' && filed.order.length === ORDER_WIDTH ? filed : undefined
  return filingOf(ordering, parse(delivery), delivery)
}

/** A head to run, and the failure to report instead of running it when its key cannot be computed. */
export interface OrderedRun {
  entry: OrderedEntry
  keyError?: Error
}

/**
 * The ordered take of one worker: places what must be placed, then takes heads. `finished`
 * names a key whose head ended here, so the next take looks at it at once.
 */
export class OrderedTaker {
  private readonly pokes = new Set<string>()

  constructor(
    private readonly engine: OrderingEngine,
    private readonly ordering: Ordering,
    private readonly placeLeaseMs: number,
    /** The ordering is the inbox's own: what its appends filed, the take places itself. */
    private readonly filed: boolean = false,
  ) {}

  finished(entry: InboxEntry): void {
    const key = (entry as Partial<OrderedEntry>).orderKey
    if (key !== undefined) this.pokes.add(key)
  }

  /**
   * Up to `max` heads to run, or none with the time to wait (another worker is placing: a few
   * milliseconds). Places at most a few rounds of new deliveries first.
   */
  async take(max: number, visibilityMs: number): Promise<{ run: OrderedRun[]; waitMs?: number }> {
    // Bounded: each round places up to a batch; past a few rounds, come back through the loop.
    const rounds = 8
    /** A batch placed by the next take, on an engine that places in the take's round trip. */
    let placements: Placement[] = []
    for (let round = 0; round < rounds; round++) {
      const poke = [...this.pokes]
      const taken = await this.engine.takeOrdered(max, visibilityMs, {
        placeLeaseMs: this.placeLeaseMs,
        poke,
        ...(placements.length > 0 && { placements }),
        ...(this.filed && { filed: { strict: this.ordering.strict } }),
      })
      placements = []
      for (const key of poke) this.pokes.delete(key)
      if (taken.place.length > 0) {
        const batch = taken.place.map((entry) => this.placement(entry))
        // The last round has no next take to carry the batch.
        if (this.engine.placesInTake === true && round < rounds - 1) placements = batch
        else await this.engine.place(batch)
        continue
      }
      if (taken.more) continue
      // Another worker is placing: a round trip or two away from done.
      if (taken.busy) return { run: [], waitMs: 5 }
      return { run: taken.run.map((entry) => this.checked(entry)) }
    }
    return { run: [], waitMs: 0 }
  }

  private placement(entry: InboxEntry): Placement {
    const event = parse(entry)
    const order = orderOf(event, entry.receivedAt)
    // A corrupt body is buried by the processing path; a failing key function fails its run
    // (checked again then, see `checked`). Either way it waits under a key of its own, so it
    // never holds a conversation.
    const result = event === undefined ? undefined : keyOf(this.ordering, event)
    const key = result !== undefined && 'key' in result ? result.key : undefined
    return { entry, key: key ?? aloneKey(entry), order, strict: this.ordering.strict }
  }

  /** A head placed alone because its key function failed is checked again: still failing, its run fails with the reason. */
  private checked(entry: OrderedEntry): OrderedRun {
    if (!entry.orderKey.startsWith(ALONE)) return { entry }
    const event = parse(entry)
    if (event === undefined) return { entry }
    const result = keyOf(this.ordering, event)
    return 'error' in result ? { entry, keyError: result.error } : { entry }
  }
}
