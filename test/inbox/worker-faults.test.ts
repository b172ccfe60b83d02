/**
 * The inbox worker's fault suite and default log on MemoryInbox (worker-faults.ts; the same suite
 * runs over real Redis and Postgres in worker-engines.test.ts).
 */
import { MemoryInbox } from 'svc-webhooks'
import { describeWorkerFaults, describeWorkerLog } from './worker-faults.js'

describeWorkerFaults('MemoryInbox', async () => new MemoryInbox(), { countsTakes: true })
describeWorkerLog('MemoryInbox', async () => new MemoryInbox())
