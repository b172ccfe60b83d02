/**
 * `npm run bench:tenants`: what a per-request secret costs. The same receiver (`receive()` with a
 * transport over prebuilt requests, MemoryStore, an empty handler) with a fixed secret, with a
 * secret source (read through the receiver's cache: the reads are counted and printed, one per
 * receiver), with a synchronous lookup in a Map, and with an async lookup through a TTL cache of
 * resolved secrets in front of a "database", every delivery a distinct, freshly signed one for one
 * of 1,000 tenants (one tenant signs all for the fixed secret and the source). The
 * keys a lookup returns are imported once per secret and cached by the receiver. Interleaved
 * rounds, the median per variant, and the difference per request against the fixed secret.
 *
 * Options: --deliveries 100000 (per round and variant), --rounds 5.
 */
import { createHmac } from 'node:crypto'
import { createWebhookReceiver } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const flag = (name, fallback) => {
  const i = process.argv.indexOf(name)
  const value = i === -1 ? fallback : Number(process.argv[i + 1])
  if (!Number.isInteger(value) || value < 1 || value > 10_000_000) throw new Error(`bench:tenants: ${name} takes a positive whole number`)
  return value
}
const DELIVERIES = flag('--deliveries', 100_000)
const ROUNDS = flag('--rounds', 5)
const TENANTS = 1_000

const secrets = new Map(Array.from({ length: TENANTS }, (_, i) => [`t${i}`, `svc_whsec_tenant_${i}_${'x'.repeat(24)}`]))
const first = await signWebhook({ secret: 'svc_whsec_warm', event: sampleEvent('message.received') })
const body = Buffer.from(first.rawBody)
let sequence = 0

/** Requests for `count` distinct deliveries across the tenants, each signed with its tenant's secret. */
function requests(count) {
  const timestamp = String(Math.floor(Date.now() / 1000))
  return Array.from({ length: count }, () => {
    const n = sequence++
    const tenant = `t${n % TENANTS}`
    const id = `evt_${n}`
    const v2 = createHmac('sha256', secrets.get(tenant)).update(`${id}.${timestamp}.`).update(body).digest('hex')
    return { tenant, headers: { 'svc-webhook-id': id, 'svc-webhook-timestamp': timestamp, 'svc-webhook-signature-v2': `v2=${v2}` } }
  })
}

const transport = { method: () => 'POST', header: (request, name) => request.headers[name], body: () => body }
const on = { 'message.received': () => {} }

/**
 * An in-process TTL cache of resolved secrets in front of an async store. Not the README's
 * `cachedSecrets` recipe, which caches the promises, has `unknownTtlMs` and a 10,000-entry bound.
 */
function cachedLookup(load, ttlMs = 60_000) {
  const cache = new Map()
  return async (tenant) => {
    const hit = cache.get(tenant)
    if (hit && hit.expires > Date.now()) return hit.secret
    const secret = await load(tenant)
    cache.set(tenant, { secret, expires: Date.now() + ttlMs })
    return secret
  }
}
const database = async (tenant) => secrets.get(tenant)
const lookup = cachedLookup(database)

/** A secret source answering like a store would (asynchronously), its reads counted. */
let sourceReads = 0
const source = {
  read: async () => {
    sourceReads++
    return { secrets: [secrets.get('t0')] }
  },
}

const VARIANTS = {
  'fixed secret (one tenant signs all)': () =>
    createWebhookReceiver({ secret: secrets.get('t0'), on, log: false }),
  'secret source (cached)': () => createWebhookReceiver({ secret: source, on, log: false }),
  'sync lookup in a Map': () =>
    createWebhookReceiver({ secret: (request) => secrets.get(request.tenant), endpoint: (request) => request.tenant, on, log: false }),
  'async lookup, TTL cache of resolved secrets': () =>
    createWebhookReceiver({ secret: (request) => lookup(request.tenant), endpoint: (request) => request.tenant, on, log: false }),
}

async function measure(name) {
  const receiver = VARIANTS[name]()
  let batch = requests(DELIVERIES)
  // The fixed-secret and source receivers verify every delivery against t0's secret: sign them all with it.
  if (ONE_TENANT.has(name)) batch = batch.map((r) => ({ ...r, tenant: 't0', headers: { ...r.headers, 'svc-webhook-signature-v2': `v2=${createHmac('sha256', secrets.get('t0')).update(`${r.headers['svc-webhook-id']}.${r.headers['svc-webhook-timestamp']}.`).update(body).digest('hex')}` } }))
  for (let i = 0; i < 2_000; i++) await receiver.receive(batch[i], transport) // warm
  const start = process.hrtime.bigint()
  for (let i = 2_000; i < batch.length; i++) {
    const answer = await receiver.receive(batch[i], transport)
    if (answer.status !== 200) throw new Error(`bench:tenants: ${name} answered ${answer.status} ${answer.body}`)
  }
  return Number(process.hrtime.bigint() - start) / (batch.length - 2_000)
}

const ONE_TENANT = new Set(['fixed secret (one tenant signs all)', 'secret source (cached)'])
const results = Object.fromEntries(Object.keys(VARIANTS).map((name) => [name, []]))
for (let round = 0; round < ROUNDS; round++) {
  const names = Object.keys(VARIANTS)
  for (let i = 0; i < names.length; i++) {
    const name = names[(i + round) % names.length]
    results[name].push(await measure(name))
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
const base = median(results['fixed secret (one tenant signs all)'])
console.log(`\n${DELIVERIES.toLocaleString('en-US')} deliveries per round, ${ROUNDS} rounds, ${TENANTS} tenants, Node ${process.versions.node}`)
console.log(`secret source: ${sourceReads} reads for ${(ROUNDS * DELIVERIES).toLocaleString('en-US')} deliveries (${ROUNDS} receivers)\n`)
console.log('| secret | ns per delivery (median) | vs fixed secret |')
console.log('|---|---:|---:|')
for (const [name, values] of Object.entries(results)) {
  const ns = median(values)
  console.log(`| ${name} | ${Math.round(ns).toLocaleString('en-US')} | ${ns === base ? '-' : `${ns > base ? '+' : ''}${Math.round(ns - base).toLocaleString('en-US')} ns`} |`)
}
