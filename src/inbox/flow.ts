/**
 * The worker's side of flow control (DESIGN.md "Flow control"): `rateLimit` and `pause()` /
 * `resume()`. Both live in the engine (src/contracts/ordering.ts `FlowEngine`): the token bucket
 * so the rate is shared by every worker on one inbox rather than multiplied by their number, the
 * pause flag so one call stops every worker. A worker asks before each take how many deliveries
 * it may start; receivers never ask, so they keep answering 202 while paused.
 */
import { isFlowEngine, type FlowEngine, type PauseState } from '../contracts/ordering.js'
import { printable } from '../log-window.js'

/** The worker's `rateLimit` option. */
export interface RateLimit {
  /** Handler starts per second, shared by every worker on the same inbox. */
  perSecond: number
  /**
   * Starts allowed at once after an idle spell (the bucket's size).
   * @default a tenth of a second's worth, at least 1
   */
  burst?: number
}

/** How long a paused worker waits before looking at the flag again. */
const PAUSED_POLL_MS = 250
/** Conditional writes of the pause flag tried before giving up (another process keeps changing it). */
const PAUSE_TRIES = 5

/** Reads `rateLimit`; a TypeError for one that is not valid or an engine that cannot share it. */
export function resolveRate(option: RateLimit | undefined, inbox: unknown): { perSecond: number; burst: number } | undefined {
  if (option === undefined) return undefined
  const { perSecond, burst = Math.max(1, Math.ceil(perSecond / 10)) } = option ?? {}
  if (!(typeof perSecond === 'number' && perSecond > 0 && Number.isFinite(perSecond))) throw new TypeError('svc-webhooks: createInboxWorker `rateLimit.perSecond` must be a positive number.')
  if (!(typeof burst === 'number' && burst >= 1 && Number.isFinite(burst))) throw new TypeError('svc-webhooks: createInboxWorker `rateLimit.burst` must be a number, 1 or more.')
  if (!isFlowEngine(inbox)) {
    throw new TypeError('svc-webhooks: createInboxWorker `rateLimit` needs an inbox that shares a token bucket between workers (MemoryInbox, RedisInbox, PostgresInbox); a per-process limit would multiply with the number of workers.')
  }
  return { perSecond, burst }
}

/** The worker's flow gate: admission before each take, and the pause calls. */
export class FlowGate {
  private readonly engine: FlowEngine | undefined
  private loggedVersion = 0
  private paused = false

  constructor(
    inbox: unknown,
    private readonly rate: { perSecond: number; burst: number } | undefined,
    private readonly say: (line: string) => void,
  ) {
    this.engine = isFlowEngine(inbox) ? inbox : undefined
  }

  /** How many of `want` may start now; with none, how long to wait before asking again. */
  async admit(want: number): Promise<{ granted: number; waitMs: number }> {
    if (!this.engine) return { granted: want, waitMs: 0 }
    const admission = await this.engine.admit(want, this.rate)
    this.observe(admission.pause)
    if (admission.pause.paused) return { granted: 0, waitMs: PAUSED_POLL_MS }
    return { granted: admission.granted, waitMs: admission.granted > 0 ? 0 : Math.max(1, admission.waitMs) }
  }

  /**
   * Whether deliveries just taken may start: a pause written between the admission and the take
   * is seen here, so what that take brought is handed back instead of started.
   */
  async open(): Promise<boolean> {
    if (!this.engine) return true
    const admission = await this.engine.admit(0)
    this.observe(admission.pause)
    return !admission.pause.paused
  }

  /** Gives back what was admitted but not started. */
  async refund(unused: number): Promise<void> {
    if (!this.engine || !this.rate || unused <= 0) return
    await this.engine.refund(unused, this.rate).catch(() => undefined)
  }

  /** Logs a pause once (with who paused) and the resume after it, as seen by this worker. */
  private observe(pause: PauseState): void {
    if (pause.paused && (!this.paused || pause.version !== this.loggedVersion)) {
      this.loggedVersion = pause.version
      const by = pause.by ? ` by ${printable(pause.by, 100)}` : ''
      this.say(`svc-webhooks: inbox worker: paused${by}: no delivery starts until resume(); receivers keep answering 202 and deliveries wait in the inbox.`)
    } else if (!pause.paused && this.paused) {
      this.say('svc-webhooks: inbox worker: resumed: deliveries start again.')
    }
    this.paused = pause.paused
  }

  /** Sets the pause flag with a conditional write (read its version, write if unchanged). */
  async set(paused: boolean, by?: string): Promise<PauseState> {
    if (!this.engine) throw new TypeError('svc-webhooks: pause() and resume() need an inbox that keeps a pause flag for every worker (MemoryInbox, RedisInbox, PostgresInbox).')
    if (by !== undefined && typeof by !== 'string') throw new TypeError('svc-webhooks: pause(by) takes a string naming who paused.')
    for (let tries = 0; tries < PAUSE_TRIES; tries++) {
      const { pause } = await this.engine.flow()
      if (pause.paused === paused) return pause
      const written = await this.engine.setPause(paused, by, pause.version)
      if (written) return written
    }
    throw new Error(`svc-webhooks: the pause flag kept changing under ${PAUSE_TRIES} tries; try again.`)
  }
}
