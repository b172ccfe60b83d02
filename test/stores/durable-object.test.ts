/**
 * The store contract against DurableObjectStore in real workerd (Miniflare): the test Worker
 * (test/adapters/cloudflare.worker.ts) exposes the store at POST /store, and each call here is a
 * real HTTP request into the Worker, which calls the Durable Object. Atomicity is the object's.
 */
import { describe } from 'vitest'
import type { IdempotencyStore } from 'svc-webhooks'
import { CASE_SECRET } from '../support/case-table-constants.js'
import { bundleWorker, startWorkerd } from '../support/workerd.js'
import { describeStoreContract } from './contract.js'

describe('store contract: DurableObjectStore (workerd)', () => {
  describeStoreContract(async () => {
    const server = await startWorkerd({
      script: await bundleWorker('test/adapters/cloudflare.worker.ts'),
      bindings: { SVC_WEBHOOK_SECRET: CASE_SECRET },
      durableObjects: { WEBHOOK_IDEMPOTENCY: { className: 'WebhookIdempotencyObject', useSQLite: true } },
    })
    const storeWith = (prefix?: string): IdempotencyStore => {
      const call = async <T>(op: string, key: string, owner: string, ms = 0): Promise<T> => {
        const res = await fetch(`${server.url}/store`, { method: 'POST', body: JSON.stringify({ op, key, owner, ms, prefix }) })
        if (!res.ok) throw new Error(`store call answered ${res.status}`)
        return ((await res.json()) as { result: T }).result
      }
      return {
        claim: (key, owner, leaseMs) => call('claim', key, owner, leaseMs),
        complete: (key, owner, retentionMs) => call('complete', key, owner, retentionMs),
        release: (key, owner) => call('release', key, owner),
      }
    }
    return { store: storeWith(), isolated: () => storeWith('other-store:'), close: () => server.dispose() }
  })
})
