/**
 * The worker's side of "every worker on one inbox uses the same ordering" (DESIGN.md "Order
 * within a conversation"): a worker started without `ordering` on an inbox where one runs with it
 * would take deliveries before they are placed and run them out of order, and one with `ordering`
 * could not keep the order while the other runs. Each worker marks its mode in the engine
 * (src/contracts/ordering.ts `ModeEngine`) for a visibility timeout, renews it every third of it
 * and removes it when it stops; a worker that meets a live mark of the other mode takes nothing,
 * says why once, and looks again until no such mark is left (a crashed worker's ends one
 * visibility timeout after its last renewal). Engine-neutral: each engine only keeps the marks.
 */
import { isModeEngine, type ModeEngine, type WorkerMode } from '../contracts/ordering.js'

/** The line a worker that must wait says, naming both options. */
function mixedModeLine(mode: WorkerMode): string {
  return mode === 'ordered'
    ? `a worker without \`ordering\` runs on this inbox, and this one has \`ordering\`: it would take deliveries before they are placed and run them out of order, so this worker takes nothing until it stops. Give every worker on one inbox the same \`ordering\` option (a crashed worker's mark ends one visibility timeout after it crashed).`
    : `a worker with \`ordering\` runs on this inbox, and this one has none: it would run deliveries out of the order the other keeps, so this worker takes nothing until that one stops. Give every worker on one inbox the same \`ordering\` option (a crashed worker's mark ends one visibility timeout after it crashed).`
}

/** The error `onError` receives when a worker must wait for one of the other mode. */
function mixedModeError(mode: WorkerMode): Error {
  return Object.assign(new Error(`svc-webhooks: inbox worker: ${mixedModeLine(mode)}`), { name: 'MixedOrderingError' })
}

/** A worker's mode mark: `allowed()` says whether it may take now. */
export class ModeGate {
  private readonly engine: ModeEngine | undefined
  private timer: ReturnType<typeof setInterval> | undefined
  private last: Promise<boolean> = Promise.resolve(true)
  private waiting = false
  /** This worker's id in the marks. */
  private readonly id = crypto.randomUUID()

  constructor(
    inbox: unknown,
    private readonly mode: WorkerMode,
    private readonly ttlMs: number,
    private readonly say: (text: string) => void,
    private readonly onError: (error: unknown) => void,
  ) {
    this.engine = isModeEngine(inbox) ? inbox : undefined
  }

  /** Marks this worker's mode now and every third of the mark's life while it runs. */
  start(): void {
    if (!this.engine || this.timer) return
    this.claim()
    this.timer = setInterval(() => this.claim(), Math.max(1, Math.floor(this.ttlMs / 3)))
    ;(this.timer as { unref?: () => void }).unref?.()
  }

  /** Stops renewing and removes this worker's mark, so workers of the other mode need not wait for it to end. */
  async stop(): Promise<void> {
    if (!this.timer) return
    clearInterval(this.timer)
    this.timer = undefined
    await this.last
    // Unanswered: the mark ends by itself.
    await this.engine!.releaseMode(this.mode, this.id).catch(() => undefined)
  }

  /**
   * Whether the last mark was written (no live mark of the other mode); true where the engine
   * cannot tell. A waiting worker asks again on each call, so it goes on as soon as the other stops.
   */
  allowed(): Promise<boolean> {
    if (this.waiting && this.timer) this.claim()
    return this.last
  }

  private claim(): void {
    const engine = this.engine!
    this.last = engine.claimMode(this.mode, this.id, this.ttlMs).then(
      (claimed) => {
        if (!claimed && !this.waiting) {
          this.say(mixedModeLine(this.mode))
          this.onError(mixedModeError(this.mode))
        } else if (claimed && this.waiting) this.say('the workers on this inbox agree on `ordering` again: taking deliveries.')
        this.waiting = !claimed
        return claimed
      },
      // Unanswered: the take that follows meets the same outage and says so.
      () => !this.waiting,
    )
  }
}
