/**
 * The inbox worker's fault suite and default log on MemoryInbox (worker-faults.ts; the same suite
 * runs over real Redis and Postgres in worker-engines.test.ts).
 */
import { expectTypeOf, it } from 'vitest'
import { MemoryInbox, type InboxWorkerOptions, type InboxWorkerResult, type VerifiedDelivery } from 'svc-webhooks'
import { describeWorkerFaults, describeWorkerLog } from './worker-faults.js'

describeWorkerFaults('MemoryInbox', async () => new MemoryInbox())
describeWorkerLog('MemoryInbox', async () => new MemoryInbox())

it('types: the delivery carries an optional signal; the worker takes handlerTimeoutMs, maxStalledCount and log; unrecorded is an outcome', () => {
  expectTypeOf<VerifiedDelivery['signal']>().toEqualTypeOf<AbortSignal | undefined>()
  expectTypeOf<InboxWorkerOptions['handlerTimeoutMs']>().toEqualTypeOf<number | undefined>()
  expectTypeOf<InboxWorkerOptions['maxStalledCount']>().toEqualTypeOf<number | undefined>()
  expectTypeOf<InboxWorkerOptions['log']>().toEqualTypeOf<false | ((line: string) => void) | undefined>()
  expectTypeOf<'unrecorded'>().toExtend<InboxWorkerResult['outcome']>()
})
