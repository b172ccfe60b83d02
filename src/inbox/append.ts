/**
 * The receiver's append to a durable inbox, within the sender's patience. The sender waits 10 s
 * for an answer (spec/service-api.md §6.3) and counts every 503 toward disabling the endpoint
 * after 20 in a row, so an inbox that is away for a few seconds (a database restart, a failover)
 * is better waited for inside the request than answered 503 at once: at 20 deliveries/s, a 3 s
 * restart answered at once is 60 failures and a disabled endpoint.
 */
import { isInboxError, type AppendResult, type InboxDelivery, type WebhookInboxProducer } from '../contracts/inbox.js'

/** How long the receiver keeps trying an unavailable inbox by default, in milliseconds. */
export const DEFAULT_INBOX_WAIT_MS = 5000

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms))

/**
 * Appends `delivery`, trying again (100 ms, doubling, at most 1 s apart) while the inbox is
 * unavailable and `waitMs` has not passed since the first try. An inbox that refuses (an
 * `InboxError` of kind `refused`: it will keep refusing) is not tried again. The last try may
 * start just before `waitMs` ends, so the answer comes within `waitMs` plus one append's own
 * timeout: keep both under the sender's 10 s.
 *
 * @example
 * const appended = await appendWithin(inbox, delivery, 5000) // 'accepted' | 'duplicate', or throws
 */
export async function appendWithin(inbox: WebhookInboxProducer, delivery: InboxDelivery, waitMs: number): Promise<AppendResult> {
  // The wall clock, never the receiver's injectable `now`: a fixed test clock would wait forever.
  const deadline = Date.now() + waitMs
  for (let attempt = 1, delay = 100; ; attempt++, delay = Math.min(delay * 2, 1000)) {
    try {
      return await inbox.append(delivery)
    } catch (error) {
      const refused = isInboxError(error) && error.kind === 'refused'
      if (refused || attempt >= MAX_ATTEMPTS || Date.now() + delay >= deadline) throw error
      await sleep(delay)
    }
  }
}

/** Tries at most: 100 ms doubling to 1 s apart, 9 s hold this many (the bound on `inboxWaitMs`). */
const MAX_ATTEMPTS = 16
