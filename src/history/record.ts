/**
 * What the receiver and the inbox worker write to the history, and `replay`: the hooks the two
 * call, kept here so theirs stay one line each. Nothing here throws into the caller: the answer
 * to the sender is decided before a record is made, and a failing history only counts.
 */
import { decodeUtf8 } from '#crypto'
import type { WebhookEvent } from '../events.js'
import type { VerifiedDelivery } from '../verify.js'
import { errorFields } from './text.js'
import type { HistoryEntry, HistoryOutcome, HistoryRecord, KeptDelivery, ProcessedResult, ReceivedResult, ReplayResult, ReplayRun, WebhookHistory } from './types.js'

/** Adds the kept body of a delivery to `r`: raw text, or the JSON of `redact(event)`; none when too large or `redact` fails. */
function keepBody(history: WebhookHistory, r: HistoryRecord, rawBody: Uint8Array, event: unknown): HistoryRecord {
  if (!history.keepBodies || rawBody.length > history.maxBodyBytes) return r
  if (history.redact === undefined) {
    r.body = decodeUtf8(rawBody)
    return r
  }
  try {
    const kept = JSON.stringify(history.redact(structuredClone(event)))
    if (typeof kept === 'string') {
      r.body = kept
      r.bodyRedacted = true
    }
  } catch {
    // A `redact` that throws keeps nothing rather than everything.
  }
  return r
}

/** The receiver outcomes that say nothing new about a delivery already in the history. */
const SOFT: Record<string, HistoryOutcome> = { duplicate: 'duplicate', in_flight: 'in_flight', store_unavailable: 'unavailable', inbox_unavailable: 'unavailable', secret_lookup_failed: 'unavailable' }

// The records below are built by assignment, not by spreading objects into literals: on every
// delivery, spreads cost about 4 us where assignments cost 0.1 us.

/**
 * Records one request's result: a verified delivery's change to its entry, or a refused
 * request's count. Never throws.
 */
export function recordReceived(history: WebhookHistory, result: ReceivedResult, delivery: KeptDelivery | undefined, at: number, fixedEndpoint?: string): void {
  try {
    // An ignored type is answered before a `endpoint` function runs: only a fixed endpoint names it.
    const endpoint = result.endpoint ?? fixedEndpoint
    if (delivery === undefined || result.id === undefined || endpoint === undefined) {
      // Unverified: a count per code, never an entry (its id and endpoint are only claims).
      if (result.outcome === 'refused' || result.outcome === 'method_not_allowed') history.refused(result.code ?? result.outcome, result.id, at)
      return
    }
    const r: HistoryRecord = { id: result.id, endpoint, at, outcome: 'unavailable', status: result.status, delivered: true }
    if (result.eventType !== undefined) r.eventType = result.eventType
    const soft = SOFT[result.outcome]
    if (soft !== undefined) {
      r.outcome = soft
      r.soft = true
      if (result.code !== undefined) r.code = result.code
      return history.record(r)
    }
    switch (result.outcome) {
      case 'processed':
        r.outcome = 'processed'
        r.addAttempt = true
        r.processed = true
        r.error = null
        return history.record(keepBody(history, r, delivery.rawBody, delivery.event))
      case 'handler_failed':
        r.outcome = 'failed'
        r.code = 'handler_failed'
        r.addAttempt = true
        r.error = errorFields(result.error)
        return history.record(keepBody(history, r, delivery.rawBody, delivery.event))
      case 'accepted':
      case 'ignored':
        r.outcome = result.outcome
        r.code = result.outcome
        return history.record(keepBody(history, r, delivery.rawBody, delivery.event))
      default:
        r.soft = true
        if (result.code !== undefined) r.code = result.code
        return history.record(r)
    }
  } catch {
    // The history's own failure never reaches the request.
  }
}

/** Records how the worker's run of a delivery ended. Results not recorded by the inbox (lost lease, unrecorded) change nothing: it runs again. */
export function recordProcessed(history: WebhookHistory, result: ProcessedResult, at: number): void {
  try {
    const r: HistoryRecord = { id: result.id, endpoint: result.endpoint, at, outcome: 'processed', attempts: result.attempts }
    if (result.eventType !== undefined) r.eventType = result.eventType
    switch (result.outcome) {
      case 'processed':
        r.processed = true
        r.error = null
        return history.record(r)
      case 'ignored':
        r.outcome = 'ignored'
        return history.record(r)
      case 'retrying':
      case 'dead':
        r.outcome = result.outcome
        r.error = errorFields(result.error)
        return history.record(r)
      case 'duplicate':
        r.outcome = 'duplicate'
        r.soft = true
        return history.record(r)
      default:
        return
    }
  } catch {
    // See recordReceived.
  }
}

/** Why a replay could not run. */
export type ReplayErrorCode = 'not_found' | 'body_not_kept' | 'no_handler' | 'history_unavailable'

/**
 * A replay that could not run; `code` says why. A body not kept: resend it through the service instead.
 *
 * @example
 * try { await receiver.replay(id) } catch (error) { if (error.code === 'body_not_kept') await service.deliveries.resend(id) }
 */
export class ReplayError extends Error {
  override readonly name = 'ReplayError'
  readonly code: ReplayErrorCode
  constructor(code: ReplayErrorCode, message: string) {
    super(message)
    this.code = code
  }
}

const BODY_NOT_KEPT = 'its body was not kept (history `keepBodies` is off, or the body was over `maxBodyBytes`): ' +
  'ask the service to resend it (`svc-webhooks endpoints resend ID`, or service.deliveries.resend(id)).'

/**
 * Runs a stored delivery's handler again on purpose: it does not meet the dedupe record (the
 * delivery was processed, or failed, already), and the entry counts the replay and its outcome.
 *
 * @example
 * await replayDelivery(history, { handlers, now: Date.now }, 'evt_123')
 */
export async function replayDelivery(history: WebhookHistory, ctx: ReplayRun, id: string, endpoint?: string): Promise<ReplayResult> {
  const { now } = ctx
  let entry: HistoryEntry | undefined
  try {
    entry = await history.get(id, endpoint)
  } catch (error) {
    throw new ReplayError('history_unavailable', `svc-webhooks: cannot replay ${JSON.stringify(id)}: the history did not answer (${error instanceof Error ? error.name : 'Error'}).`)
  }
  if (entry === undefined) throw new ReplayError('not_found', `svc-webhooks: no delivery ${JSON.stringify(id)} in the history (never received, or older than its retention).`)
  if (!entry.hasBody || entry.body === undefined) throw new ReplayError('body_not_kept', `svc-webhooks: delivery ${JSON.stringify(id)} cannot be replayed here: ${BODY_NOT_KEPT}`)
  let event: WebhookEvent
  try {
    event = JSON.parse(entry.body) as WebhookEvent
  } catch {
    throw new ReplayError('body_not_kept', `svc-webhooks: the kept body of ${JSON.stringify(id)} is not JSON any more: ${BODY_NOT_KEPT}`)
  }
  const type = typeof event?.event === 'string' ? event.event : entry.eventType ?? ''
  const handlers = ctx.handlers
  const handler = handlers instanceof Map ? handlers.get(type) : Object.hasOwn(handlers ?? {}, type) ? (handlers as Record<string, (event: unknown, delivery: unknown) => unknown>)[type] : undefined
  if (typeof handler !== 'function') throw new ReplayError('no_handler', `svc-webhooks: no handler for "${type}" here: replay it where its handler runs (the worker, with an inbox).`)
  const rawBody = new TextEncoder().encode(entry.body)
  const delivery: VerifiedDelivery<unknown> = { id: entry.id, timestamp: Math.floor(entry.receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody, event }
  const started = now()
  let failure: { error: unknown } | undefined
  const timeoutMs = ctx.timeoutMs ?? 300_000
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await Promise.race([
      Promise.resolve().then(() => handler(event, delivery)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error(`handler timed out after ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs)
      }),
    ])
  } catch (error) {
    failure = { error }
  } finally {
    clearTimeout(timer)
  }
  const at = now()
  const outcome = failure ? 'failed' : 'processed'
  history.record({
    id: entry.id,
    endpoint: entry.endpoint,
    at,
    outcome,
    replay: true,
    addAttempt: true,
    code: failure ? 'replay_failed' : 'replayed',
    ...(failure ? { error: errorFields(failure.error) } : { processed: true, error: null }),
  })
  await history.flush().catch(() => undefined)
  return { id: entry.id, endpoint: entry.endpoint, outcome, ...(failure && { error: failure.error }), durationMs: at - started }
}
