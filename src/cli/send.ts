/**
 * `svc-webhooks send <url>`: one delivery to your own receiver, signed and shaped as the service
 * sends it (sorted-key body, fresh timestamp, v2 and v1 signatures), with `--resend` to repeat it
 * under the same id as a retry or manual resend would.
 */
import { sampleEvent, sampleEvents, signWebhook, type SignedWebhook } from '../testing.js'
import {
  clip,
  EXIT,
  HELP_OPTION,
  httpUrl,
  integer,
  parse,
  post,
  readBytes,
  SECRET_HELP,
  SECRET_OPTIONS,
  SENDER_TIMEOUT_MS,
  senderReading,
  signingSecret,
  type Answer,
  type Io,
} from './shared.js'

export const SEND_HELP = `Usage: svc-webhooks send <url> [options]

POSTs a signed delivery to your receiver the way the service does and prints the status, the
time it took and the answer. Only to the URL you give: point it at your own receiver.

Options:
  --event TYPE         send the sample event of TYPE (default message.received; an unknown
                       type sends {"event": TYPE}, which a receiver must answer 2xx)
  --body FILE          send this body byte for byte instead of a sample
  --id ID              the delivery id (default: a new UUID); reuse one to resend it later
  --resend             send again with the same id and a new timestamp: expect 2xx, duplicate
  --v1-only            only the legacy v1 signature (a receiver should answer 401)
  --timeout MS         give up after MS milliseconds (default 10000, the service's limit)

${SECRET_HELP}

Exit codes: 0 every answer was 2xx, 1 refused or no answer, 2 usage error.`

/** The body for `--event TYPE`: the sample of a known type, else a minimal event of that type. */
export function sampleBody(type: string): object {
  return Object.hasOwn(sampleEvents, type) ? sampleEvent(type as keyof typeof sampleEvents) : { event: type }
}

/** Runs `send`; returns the exit code. */
export async function sendCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse({
    args: argv,
    options: {
      ...HELP_OPTION,
      ...SECRET_OPTIONS,
      event: { type: 'string' },
      body: { type: 'string' },
      id: { type: 'string' },
      resend: { type: 'boolean' },
      'v1-only': { type: 'boolean' },
      timeout: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  })
  if (values.help) {
    io.out(`${SEND_HELP}\n`)
    return EXIT.ok
  }
  const url = httpUrl(positionals[0], 'the receiver URL (svc-webhooks send <url>)')
  const timeoutMs = integer(values.timeout, '--timeout', SENDER_TIMEOUT_MS)
  const secret = signingSecret(values, io)
  const body = values.body === undefined ? undefined : readBytes(values.body, '--body')
  const event = body === undefined ? sampleBody(values.event ?? 'message.received') : undefined
  const schemes: ('v2' | 'v1')[] = values['v1-only'] ? ['v1'] : ['v2', 'v1']

  const first = await signWebhook({ secret, body, event, id: values.id, schemes })
  let ok = report(io, 'send', url, first, await post(url, first, timeoutMs))
  if (values.resend) {
    // A resend keeps the id and the bytes and re-signs with a fresh timestamp (spec §6.2).
    const timestamp = Math.max(Math.floor(Date.now() / 1000), first.timestamp + 1)
    const again = await signWebhook({ secret, body: first.rawBody, id: first.id, timestamp, schemes })
    ok = report(io, 'resend', url, again, await post(url, again, timeoutMs)) && ok
  }
  return ok ? EXIT.ok : EXIT.failed
}

function report(io: Io, what: string, url: URL, signed: SignedWebhook, answer: Answer): boolean {
  const event = signed.headers['svc-webhook-event'] ?? '(no event field)'
  const signatures = ['svc-webhook-signature-v2', 'svc-webhook-signature'].filter((h) => h in signed.headers).map((h) => (h.endsWith('v2') ? 'v2' : 'v1'))
  io.out(`${what}: POST ${url.href}\n  id ${signed.id}  event ${event}  timestamp ${signed.timestamp}  signatures ${signatures.join(', ')}\n`)
  if (answer.error !== undefined) {
    io.out(`  no answer after ${Math.round(answer.ms)} ms: ${answer.error} (the service would count a failure and retry)\n`)
    return false
  }
  io.out(`  ${answer.status} ${answer.statusText} in ${Math.round(answer.ms)} ms: ${senderReading(answer.status)}\n`)
  if (answer.body !== '') io.out(`  ${clip(answer.body)}\n`)
  return answer.status >= 200 && answer.status < 300
}
