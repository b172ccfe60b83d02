/** The store contract against MemoryStore, the single-process default. */
import { describe } from 'vitest'
import { MemoryStore } from 'svc-webhooks'
import { describeStoreContract } from './contract.js'

describe('store contract: MemoryStore', () => {
  describeStoreContract(async () => ({ store: new MemoryStore(), close: async () => {} }))
})
