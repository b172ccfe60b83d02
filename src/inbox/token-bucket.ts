/**
 * A token bucket in this process (MemoryInbox's rate limit; the Redis and Postgres inboxes keep
 * the same arithmetic in their script and statement): refilled continuously at `perSecond`,
 * holding at most `burst`, so a rate is kept over any window longer than `burst / perSecond`.
 */
/** How long until the next whole token, with `tokens` left; none when some were granted (the Postgres statement's answer too). */
export function tokenWaitMs(granted: number, tokens: number, perSecond: number): number {
  return granted > 0 ? 0 : Math.ceil(((1 - tokens) * 1000) / perSecond)
}

export class TokenBucket {
  private tokens: number | undefined
  private at = 0
  /** The last rate asked for, for stats(). */
  perSecond: number | undefined

  /** Takes up to `want` whole tokens; with none, how long until the next one. */
  take(want: number, perSecond: number, burst: number, now: number): { granted: number; waitMs: number } {
    this.perSecond = perSecond
    const tokens = this.tokens === undefined ? burst : Math.min(burst, this.tokens + ((now - this.at) * perSecond) / 1000)
    const granted = Math.max(0, Math.min(Math.floor(want), Math.floor(tokens)))
    this.tokens = tokens - granted
    this.at = now
    return { granted, waitMs: tokenWaitMs(granted, this.tokens, perSecond) }
  }

  /** Gives back tokens taken but not used. */
  refund(tokens: number, burst: number): void {
    if (this.tokens !== undefined) this.tokens = Math.min(burst, this.tokens + tokens)
  }
}
