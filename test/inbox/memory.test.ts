/** MemoryInbox against the inbox contract. */
import { MemoryInbox } from 'svc-webhooks'
import { describeInboxContract } from './contract.js'

describeInboxContract('MemoryInbox', async ({ retentionMs }) => new MemoryInbox({ retentionMs }))
