/**
 * What every job-queue engine's inbox promises the receiver (the `append` half of the inbox
 * contract, test/inbox/contract.ts: the engine's own worker takes, retries and buries): accepted
 * once and a duplicate after, for as long as the job waits and once it completed; distinct keys
 * side by side; ten appends of one delivery at once with exactly one accepted; the raw bytes of
 * every byte value and of a 1 MiB body stored exactly.
 *
 * @example
 * describeProducerContract('BullMQInbox', async () => ({ inbox, storedBody, complete }))
 */
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { InboxDelivery, WebhookInboxProducer } from 'svc-webhooks'
import { inboxDelivery } from '../inbox/contract.js'

export interface ProducerUnderTest {
  /** A fresh inbox (its own queue). */
  inbox: WebhookInboxProducer
  /** The body bytes of the job stored for `delivery`, read from the engine. */
  storedBody(delivery: InboxDelivery): Promise<Uint8Array>
  /** Takes the job of `delivery` and completes it, as the engine's worker would. */
  complete(delivery: InboxDelivery): Promise<void>
}

export function describeProducerContract(name: string, create: () => Promise<ProducerUnderTest>): void {
  describe(`producer contract: ${name}`, () => {
    it('accepted once, a duplicate while it waits and once it completed; another key is accepted', async () => {
      const { inbox, complete } = await create()
      const d = inboxDelivery()
      expect(await inbox.append(d)).toBe('accepted')
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.append(inboxDelivery())).toBe('accepted')
      await complete(d)
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
    })

    it('ten appends of one delivery at once: exactly one accepted', async () => {
      const { inbox } = await create()
      const d = inboxDelivery()
      const results = await Promise.all(Array.from({ length: 10 }, () => inbox.append({ ...d, receivedAt: Date.now() })))
      expect(results.filter((r) => r === 'accepted')).toHaveLength(1)
      expect(results.filter((r) => r === 'duplicate')).toHaveLength(9)
    })

    it('raw bytes stored exactly: every byte value, and a 1 MiB body', async () => {
      const { inbox, storedBody } = await create()
      for (const rawBody of [Uint8Array.from({ length: 256 }, (_, i) => i), new Uint8Array(randomBytes(1024 * 1024))]) {
        const d = inboxDelivery({ rawBody })
        expect(await inbox.append(d)).toBe('accepted')
        expect(Buffer.from(await storedBody(d)).equals(Buffer.from(rawBody))).toBe(true)
      }
    })
  })
}
