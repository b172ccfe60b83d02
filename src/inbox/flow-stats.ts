/** The flow-control figures an engine's `stats()` adds (DESIGN.md "Flow control"). */
import type { InboxStats } from '../contracts/inbox.js'
import type { PauseState } from '../contracts/ordering.js'

/** `paused`, `pausedBy` and `rateLimitPerSecond` for stats() from the engine's flow state. */
export function flowStats(flow: { pause: Pick<PauseState, 'paused' | 'by'>; perSecond?: number }): Pick<InboxStats, 'paused' | 'pausedBy' | 'rateLimitPerSecond'> {
  return {
    paused: flow.pause.paused,
    ...(flow.pause.paused && flow.pause.by !== undefined && { pausedBy: flow.pause.by }),
    ...(flow.perSecond !== undefined && { rateLimitPerSecond: flow.perSecond }),
  }
}
