/**
 * The receiver's append to a durable inbox, within the sender's patience. The sender waits 10 s
 * for an answer (spec/service-api.md §6.3) and counts every 503 toward disabling the endpoint
 * after 20 in a row, so an inbox that is away for a few seconds (a database restart, a failover)
 * is better waited for inside the request than answered 503 at once: at 20 deliveries/s, a 3 s
 * restart answered at once is 60 failures and a disabled endpoint.
 */
import { isInboxError, type AppendResult, type InboxDelivery, type WebhookInboxProducer } from '../contracts/inbox.js'

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms))

/**
 * Appends `delivery` by `deadline` (wall-clock ms), which the inbox is given too: an engine that
 * takes it (Redis, Postgres) keeps one append going through a restart or a failover, with one
 * token, so a late landing is recognised as its own instead of turning the next try into a
 * duplicate. An inbox that rejects before the deadline anyway (it ignores it, or its client gave
 * up) is tried again, 100 ms doubling to 1 s apart, while time is left. An inbox that refuses (an
 * `InboxError` of kind `refused`: it will keep refusing) is not tried again.
 *
 * @example
 * const appended = await appendWithin(inbox, delivery, Date.now() + 8000) // 'accepted' | 'duplicate', or throws
 */
export async function appendWithin(inbox: WebhookInboxProducer, delivery: InboxDelivery, deadline: number): Promise<AppendResult> {
  for (let attempt = 1, delay = 100; ; attempt++, delay = Math.min(delay * 2, 1000)) {
    try {
      return await inbox.append(delivery, deadline)
    } catch (error) {
      const refused = isInboxError(error) && error.kind === 'refused'
      if (refused || attempt >= MAX_ATTEMPTS || Date.now() + delay >= deadline) throw error
      await sleep(delay)
    }
  }
}

/** Tries at most: 100 ms doubling to 1 s apart, 9 s hold this many (the bound on the wait). */
const MAX_ATTEMPTS = 16
