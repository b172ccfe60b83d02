/**
 * Fresh signed deliveries for the benches that send many: one sample body signed once by the
 * package's test kit, then each delivery gets a new id and timestamp and its v2 signature computed
 * here with node:crypto (the v1 header dropped), so signing costs a bench's own process little.
 *
 * @param {string} secret the receiver's secret
 * @param {string} [idPrefix] what each id starts with (default `evt_`)
 * @returns {Promise<{ rawBody: Uint8Array, body: string, headers: () => Record<string, string> }>}
 */
import { createHmac, createSecretKey } from 'node:crypto'

export async function freshDeliveries(secret, idPrefix = 'evt_') {
  const { signWebhook, sampleEvent } = await import('svc-webhooks/testing')
  const key = createSecretKey(Buffer.from(secret, 'utf8'))
  const first = await signWebhook({ secret, event: sampleEvent('message.received'), id: 'warm' })
  const base = { ...first.headers }
  delete base['svc-webhook-signature']
  let sequence = 0
  const headers = () => {
    const timestamp = String(Math.floor(Date.now() / 1000))
    const id = `${idPrefix}${sequence++}`
    const v2 = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(first.rawBody).digest('hex')
    return { ...base, 'svc-webhook-id': id, 'svc-webhook-timestamp': timestamp, 'svc-webhook-signature-v2': `v2=${v2}` }
  }
  return { rawBody: first.rawBody, body: first.body, headers }
}
