/**
 * `svc-webhooks send <url>`: one delivery to your own receiver, signed and shaped as the service
 * sends it (sorted-key body, fresh timestamp, v2 and v1 signatures), with `--resend` to follow it
 * with a second POST under the same id, as a retry or manual resend would.
 */
import { sampleEvent, sampleEvents, signWebhook, type SignedWebhook } from '../signing.js'
import { defineCommand, EXIT, httpUrl, integer, readBytes, type Io } from './command.js'
import { answerCode, answeredDuplicate, answeredIgnored, FIXES, NO_ROUTE, noHandler, OTHER_SECRET, type Fix } from './fixes.js'
import { clip, post, SENDER_TIMEOUT_MS, senderReading, type Answer } from './http.js'
import { SECRET_FLAGS, signingSecret } from './secret.js'

export const send = defineCommand(
  {
    name: 'send',
    summary: 'POST a signed sample delivery to your receiver, as the service does',
    usage: ['<url> [options]'],
    positionals: ['<url>'],
    description: `POSTs a signed delivery to your receiver the way the service does and prints the status, the
time it took and the answer; a refusal also with its code and the fix. Only to the URL you give:
point it at your own receiver.`,
    flags: {
      event: {
        type: 'string',
        value: 'TYPE',
        help: 'send the sample event of TYPE (default message.received; an unknown\ntype sends {"event": TYPE}, which a receiver must answer 2xx)',
      },
      body: { type: 'string', value: 'FILE', help: 'send this body byte for byte instead of a sample' },
      id: { type: 'string', value: 'ID', help: 'the delivery id (default: a new UUID); reuse one to resend it later' },
      resend: {
        type: 'boolean',
        help: 'two POSTs: the delivery, then the same bytes again under the same id with\na new timestamp, as a retry or manual resend (expect 2xx, duplicate)',
      },
      'v1-only': { type: 'boolean', help: 'only the legacy v1 signature (a receiver should answer 401)' },
      timeout: { type: 'string', value: 'MS', help: "give up after MS milliseconds (default 10000, the service's limit)" },
      ...SECRET_FLAGS,
    },
    examples: ['npx svc-webhooks send http://127.0.0.1:3000/webhooks/svc --resend'],
    exitCodes: '0 every answer was 2xx (a sample answered "ignored" is printed as a warning), 1 refused or no answer, 2 usage error.',
  },
  async ({ values, positionals }, io) => {
    const url = httpUrl(positionals[0], 'the receiver URL (svc-webhooks send <url>)')
    const timeoutMs = integer(values.timeout, '--timeout', SENDER_TIMEOUT_MS)
    const secret = signingSecret(values, io)
    const body = values.body === undefined ? undefined : readBytes(values.body, '--body')
    const type = values.event ?? 'message.received'
    const event = body !== undefined ? undefined : Object.hasOwn(sampleEvents, type) ? sampleEvent(type as keyof typeof sampleEvents) : { event: type }
    const v1Only = values['v1-only'] === true
    const schemes: ('v2' | 'v1')[] = v1Only ? ['v1'] : ['v2', 'v1']

    const first = await signWebhook({ secret, body, event, id: values.id, schemes })
    // A sample's bytes are what JSON.parse + JSON.stringify give back, so a signature refused on
    // one names the secret, not a re-serializing receiver.
    const sent: Sent = { v1Only, sample: body === undefined }
    let ok = report(io, 'send', url, first, await post(url, first, timeoutMs), sent)
    if (values.resend) {
      // A resend keeps the id and the bytes and re-signs with a fresh timestamp (spec §6.2).
      const timestamp = Math.max(Math.floor(Date.now() / 1000), first.timestamp + 1)
      const again = await signWebhook({ secret, body: first.rawBody, id: first.id, timestamp, schemes })
      const answer = await post(url, again, timeoutMs)
      ok = report(io, 'resend', url, again, answer, sent) && ok
      if (answer.error === undefined && answer.status >= 200 && answer.status < 300 && !answeredDuplicate(answer.body) && !answeredIgnored(answer.body)) {
        io.out('  warning: the resend was taken as a new delivery, not marked a duplicate: did the handler run twice?\n' +
          '  fix: deduplicate on svc-webhook-id (claim -> run -> complete) and answer 2xx {"duplicate":true} for an id already processed.\n')
      }
    }
    return ok ? EXIT.ok : EXIT.failed
  },
)

/** What was sent, as far as reading the answer needs it. */
interface Sent {
  v1Only: boolean
  /** A sample event (no --body): its bytes survive re-serialization. */
  sample: boolean
}

/** Prints one POST and its answer; true when it was delivered. */
function report(io: Io, what: string, url: URL, signed: SignedWebhook, answer: Answer, sent: Sent): boolean {
  const event = signed.headers['svc-webhook-event'] ?? '(no event field)'
  const signatures = ['svc-webhook-signature-v2', 'svc-webhook-signature'].filter((h) => h in signed.headers).map((h) => (h.endsWith('v2') ? 'v2' : 'v1'))
  io.out(`${what}: POST ${url.href}\n  id ${signed.id}  event ${event}  timestamp ${signed.timestamp}  signatures ${signatures.join(', ')}\n`)
  if (answer.error !== undefined) {
    io.out(`  no answer after ${Math.round(answer.ms)} ms: ${answer.error.code}: ${answer.error.meaning} (the service would count a failure and retry)\n`)
    return false
  }
  const delivered = answer.status >= 200 && answer.status < 300
  const code = answerCode(answer.body)
  const noRoute = code === undefined && (answer.status === 404 || answer.status === 405)
  const ignored = delivered && answeredIgnored(answer.body)
  let reading = senderReading(answer.status)
  if (noRoute) reading = 'not delivered: nothing at this URL took the delivery (the service would not retry it)'
  else if (ignored) reading = 'delivered, but ignored: the receiver ran no handler for it'
  else if (delivered && answeredDuplicate(answer.body)) reading = 'a duplicate: delivered before, the handler did not run again'
  io.out(`  ${answer.status} ${answer.statusText} in ${Math.round(answer.ms)} ms: ${reading}\n`)
  // An HTML "not found" page says nothing the hint does not.
  if (answer.body !== '' && !noRoute) io.out(`  ${clip(answer.body)}\n`)
  // An event type of the catalog is one the receiver is expected to handle; another is ignored by design.
  if (ignored && Object.hasOwn(sampleEvents, event)) {
    const fix = noHandler(event)
    io.out(`  warning: ${fix.cause}\n  fix: ${fix.fix}\n`)
  } else if (!delivered) {
    const fix = noRoute ? NO_ROUTE : refusalFix(code, answer, sent)
    if (fix !== undefined) io.out(`  ${fix.cause}\n  fix: ${fix.fix}\n`)
  }
  return delivered
}

/** What the refusal means: by the answer's code, or for a 401 without one, by what a 401 most often is. */
function refusalFix(code: ReturnType<typeof answerCode>, answer: Answer, sent: Sent): Fix | undefined {
  if (code === 'v1_not_allowed' && sent.v1Only) {
    return { cause: 'v1_not_allowed: as expected with --v1-only, the receiver requires v2', fix: 'nothing, unless this receiver must accept a legacy sender (allowV1: true).' }
  }
  if (code === 'invalid_signature' && sent.sample) return { cause: `invalid_signature: ${OTHER_SECRET.cause}`, fix: OTHER_SECRET.fix }
  if (code !== undefined) return { cause: `${code}: ${FIXES[code].cause}`, fix: FIXES[code].fix }
  if (answer.status === 401) return { cause: 'no code in the answer; a 401 most often means the signature did not verify', fix: (sent.sample ? OTHER_SECRET : FIXES.invalid_signature).fix }
  return undefined
}
