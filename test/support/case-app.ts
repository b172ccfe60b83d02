/**
 * The handler side of the case table (see case-table.ts, CASE_APP): framework-neutral and free
 * of Node imports, so the same code is bundled into Node servers, workerd and Next.js apps.
 */
import type { WebhookHandlers } from 'svc-webhooks'
import { CASE_MAX_BODY_BYTES, CASE_SECRET } from './case-table-constants.js'

export { CASE_MAX_BODY_BYTES, CASE_PATH, CASE_SECRET, RUNS_PATH } from './case-table-constants.js'

/** Handlers that record their runs, and the JSON body the runs route answers with. */
export interface CaseApp {
  on: WebhookHandlers
  /** Receiver options for the case table (spread them into the adapter's options). */
  options: { secret: string; maxBodyBytes: number; on: WebhookHandlers }
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
    runsJson: () => JSON.stringify({ runs, attempts }),
  }
}
