/**
 * `svc-webhooks sign`: the headers the service would send with a given body, as curl flags or
 * JSON, so any HTTP client can replay a signed delivery.
 */
import { signWebhook } from '../testing.js'
import { EXIT, HELP_OPTION, integer, parse, readBytes, SECRET_HELP, SECRET_OPTIONS, signingSecret, UsageError, type Io } from './shared.js'

export const SIGN_HELP = `Usage: svc-webhooks sign [--body FILE] [options]

Prints the headers for a body (read from --body FILE, or stdin) signed as the service signs it:
svc-webhook-id, -event, -timestamp, -signature-v2 and -signature. The body is signed byte for
byte; send exactly those bytes (curl --data-binary @FILE, not --data).

Options:
  --body FILE           the body to sign (default: stdin)
  --format curl|json    curl -H flags on one line (default), or a JSON object of headers
  --id ID               the delivery id (default: a new UUID)
  --timestamp SECONDS   Unix seconds (default: now)
  --v1-only             only the legacy v1 signature

${SECRET_HELP}

Example:
  eval "curl -X POST http://127.0.0.1:3000/webhooks/svc --data-binary @event.json \\
    $(svc-webhooks sign --body event.json)"     # the flags are shell-quoted

Exit codes: 0 printed, 2 usage error.`

/** Runs `sign`; returns the exit code. */
export async function signCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parse({
    args: argv,
    options: {
      ...HELP_OPTION,
      ...SECRET_OPTIONS,
      body: { type: 'string' },
      format: { type: 'string', default: 'curl' },
      id: { type: 'string' },
      timestamp: { type: 'string' },
      'v1-only': { type: 'boolean' },
    },
    allowPositionals: false,
    strict: true,
  })
  if (values.help) {
    io.out(`${SIGN_HELP}\n`)
    return EXIT.ok
  }
  if (values.format !== 'curl' && values.format !== 'json') throw new UsageError(`--format must be curl or json, got "${values.format}".`)
  const secret = signingSecret(values, io)
  let body: Uint8Array
  if (values.body !== undefined) body = readBytes(values.body, '--body')
  else if (io.stdinIsTTY) throw new UsageError('no body: pipe one in (svc-webhooks sign < event.json) or pass --body FILE.')
  else body = await io.stdin()
  const signed = await signWebhook({
    secret,
    body,
    id: values.id,
    timestamp: values.timestamp === undefined ? undefined : integer(values.timestamp, '--timestamp', 0, { min: 0 }),
    schemes: values['v1-only'] ? ['v1'] : ['v2', 'v1'],
  })
  if (values.format === 'json') io.out(`${JSON.stringify(signed.headers, null, 2)}\n`)
  else io.out(`${Object.entries(signed.headers).map(([name, value]) => `-H ${shellQuote(`${name}: ${value}`)}`).join(' ')}\n`)
  return EXIT.ok
}

/** Single-quotes a word for POSIX shells. */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`
}
