/**
 * The handler side of the case table: framework-neutral and free of Node imports, so the same
 * code is bundled into Node servers, workerd, Next.js apps and the Bun and Deno runtimes.
 *
 * CASE_APP contract, implemented once per adapter/runtime around `createCaseApp()`:
 * - secret CASE_SECRET, maxBodyBytes CASE_MAX_BODY_BYTES, default tolerance, v1 not allowed,
 *   a fresh store per app (MemoryStore unless the runtime has its own, e.g. the Durable Object store).
 * - POST CASE_PATH (any other method too: answered 405 by the adapter): the adapter in receiver
 *   mode with one handler, for 'message.received':
 *     - records an attempt for delivery.id;
 *     - if event.message.text === 'slow': waits 300 ms before finishing;
 *     - if event.message.text === 'fail-once' and this is the first attempt for this id: throws;
 *     - otherwise records a successful run for delivery.id.
 * - GET RUNS_PATH: `runsJson()`, i.e. { runs: { [id]: successfulRuns }, attempts: { [id]: attempts } }.
 *   In-process transports read `record()` instead.
 */
import type { WebhookHandlers } from 'svc-webhooks'
import { CASE_MAX_BODY_BYTES, CASE_SECRET } from './case-table-constants.js'

export { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, RUNS_PATH } from './case-table-constants.js'

/** The handler's record: successful runs and attempts, by delivery id. */
export interface RunsRecord {
  runs: Record<string, number>
  attempts: Record<string, number>
}

/** Handlers that record their runs, and the JSON body the runs route answers with. */
export interface CaseApp {
  on: WebhookHandlers
  /** Receiver options for the case table (spread them into the adapter's options). */
  options: { secret: string; maxBodyBytes: number; on: WebhookHandlers }
  /** A copy of the record, for in-process transports. */
  record(): RunsRecord
  /** The record as the runs route's JSON body. */
  runsJson(): string
}

/**
 * @example
 * const app = createCaseApp()
 * server.post(CASE_PATH, webhooks(app.options)); server.get(RUNS_PATH, (_, res) => res.type('json').send(app.runsJson()))
 */
export function createCaseApp(): CaseApp {
  const runs: Record<string, number> = {}
  const attempts: Record<string, number> = {}
  const on: WebhookHandlers = {
    'message.received': async (event, delivery) => {
      attempts[delivery.id] = (attempts[delivery.id] ?? 0) + 1
      if (event.message.text === 'slow') await new Promise((resolve) => setTimeout(resolve, 300))
      if (event.message.text === 'fail-once' && attempts[delivery.id] === 1) throw new Error('case table: failing once on purpose')
      runs[delivery.id] = (runs[delivery.id] ?? 0) + 1
    },
  }
  return {
    on,
    options: { secret: CASE_SECRET, maxBodyBytes: CASE_MAX_BODY_BYTES, on },
    record: () => ({ runs: { ...runs }, attempts: { ...attempts } }),
    runsJson: () => JSON.stringify({ runs, attempts }),
  }
}
