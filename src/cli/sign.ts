/**
 * `svc-webhooks sign`: the headers the service would send with a given body, as curl flags or
 * JSON, so any HTTP client can replay a signed delivery.
 */
import { signWebhook } from '../signing.js'
import { defineCommand, EXIT, integer, readBytes, UsageError } from './command.js'
import { SECRET_FLAGS, signingSecret } from './secret.js'

export const sign = defineCommand(
  {
    name: 'sign',
    summary: 'print the signed headers for a body (curl flags or JSON)',
    usage: ['[--body FILE] [options]'],
    description: `Prints the headers for a body (read from --body FILE, or stdin) signed as the service signs it:
svc-webhook-id, -event, -timestamp, -signature-v2 and -signature. The body is signed byte for
byte; send exactly those bytes (curl --data-binary @FILE, not --data).`,
    flags: {
      body: { type: 'string', value: 'FILE', help: 'the body to sign (default: stdin)' },
      format: { type: 'string', value: 'curl|json', help: 'curl -H flags on one line (default), or a JSON object of headers' },
      id: { type: 'string', value: 'ID', help: 'the delivery id (default: a new UUID)' },
      timestamp: { type: 'string', value: 'SECONDS', help: 'Unix seconds (default: now)' },
      'v1-only': { type: 'boolean', help: 'only the legacy v1 signature' },
      ...SECRET_FLAGS,
    },
    examples: [
      'eval "curl -X POST http://127.0.0.1:3000/webhooks/svc --data-binary @event.json \\\n' +
        '  $(npx svc-webhooks sign --body event.json)"     # the flags are shell-quoted',
    ],
    exitCodes: '0 printed, 2 usage error.',
  },
  async ({ values }, io) => {
    const format = values.format ?? 'curl'
    if (format !== 'curl' && format !== 'json') throw new UsageError(`--format must be curl or json, got "${format}".`)
    const secret = signingSecret(values, io)
    let body: Uint8Array
    if (values.body !== undefined) body = readBytes(values.body, '--body')
    else if (io.stdinIsTTY) throw new UsageError('no body: pipe one in (npx svc-webhooks sign < event.json) or pass --body FILE.')
    else body = await io.stdin()
    const signed = await signWebhook({
      secret,
      body,
      id: values.id,
      timestamp: values.timestamp === undefined ? undefined : integer(values.timestamp, '--timestamp', 0, { min: 0 }),
      schemes: values['v1-only'] ? ['v1'] : ['v2', 'v1'],
    })
    if (format === 'json') io.out(`${JSON.stringify(signed.headers, null, 2)}\n`)
    else io.out(`${Object.entries(signed.headers).map(([name, value]) => `-H ${shellQuote(`${name}: ${value}`)}`).join(' ')}\n`)
    return EXIT.ok
  },
)

/** Single-quotes a word for POSIX shells. */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`
}
