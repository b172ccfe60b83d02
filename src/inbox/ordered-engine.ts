/**
 * The ordering and flow-control calls of an inbox class (src/contracts/ordering.ts), written
 * once: an engine keeps them in a part of its own (RedisOrder, PostgresOrder) and its inbox
 * class extends {@link OrderedEngine}, which hands each call to that part. The inbox class stays
 * about appending, taking and acknowledging; the part about its scripts or statements.
 */
import type { FilingInbox, InboxDelivery } from '../contracts/inbox.js'
import { filingOf, readOrdering, type Ordering, type OrderingOption } from './ordering.js'
import type { Admission, FlowEngine, ModeEngine, OrderedTake, OrderedTakeOptions, OrderingEngine, PauseState, Placement, WorkerMode } from '../contracts/ordering.js'

/** What an engine's ordering part offers: the calls below, and `placesInTake` where it can. */
export type OrderingPart = OrderingEngine & FlowEngine & ModeEngine

/**
 * The base of an inbox whose ordering and flow control live in `order`.
 *
 * @example
 * export class RedisInbox extends OrderedEngine implements WebhookInbox {
 *   protected readonly order = new RedisOrder(...)
 * }
 */
export abstract class OrderedEngine implements OrderingEngine, FlowEngine, ModeEngine, FilingInbox {
  /** The part that keeps order, the pause flag, the token bucket and the workers' mode. */
  protected abstract readonly order: OrderingPart
  /**
   * The inbox's `ordering` option, read: appends file each delivery under its key, and workers on
   * this inbox take it as theirs.
   */
  readonly ordering: Ordering | undefined

  constructor(ordering: OrderingOption | undefined, where: string) {
    this.ordering = readOrdering(ordering, where)
  }

  fileAt(event: unknown, delivery: Pick<InboxDelivery, 'keys' | 'receivedAt'>): { key: string; order: string } | undefined {
    return this.ordering && filingOf(this.ordering, event, delivery)
  }

  get placesInTake(): boolean {
    return this.order.placesInTake === true
  }
  takeOrdered(max: number, visibilityMs: number, options: OrderedTakeOptions): Promise<OrderedTake> {
    return this.order.takeOrdered(max, visibilityMs, options)
  }
  place(placements: readonly Placement[]): Promise<boolean[]> {
    return this.order.place(placements)
  }
  admit(want: number, rate?: { perSecond: number; burst: number }): Promise<Admission> {
    return this.order.admit(want, rate)
  }
  refund(tokens: number, rate: { perSecond: number; burst: number }): Promise<void> {
    return this.order.refund(tokens, rate)
  }
  setPause(paused: boolean, by?: string, expected?: number): Promise<PauseState | undefined> {
    return this.order.setPause(paused, by, expected)
  }
  flow(): Promise<{ pause: PauseState; perSecond?: number }> {
    return this.order.flow()
  }
  claimMode(mode: WorkerMode, worker: string, ttlMs: number): Promise<boolean> {
    return this.order.claimMode(mode, worker, ttlMs)
  }
  releaseMode(mode: WorkerMode, worker: string): Promise<void> {
    return this.order.releaseMode(mode, worker)
  }
}
