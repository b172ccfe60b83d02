/**
 * `svc-webhooks verify`: checks a captured request and says which rule fails and how to fix it.
 * The verdict is the core's; the diagnosis (diagnose.ts) explains it.
 */
import { ANSWERS } from '../answer-texts.js'
import { parseRawRequest, parseHeaders, type CapturedHeaders } from './capture.js'
import { defineCommand, EXIT, integer, readBytes, readText, UsageError } from './command.js'
import { diagnose } from './diagnose.js'
import { readSecret, SECRET_FLAGS } from './secret.js'

export const verify = defineCommand(
  {
    name: 'verify',
    summary: 'check a captured request and say which rule fails and how to fix it',
    usage: ['--headers FILE --body FILE [options]', '--request FILE [options]'],
    description: `Checks a captured delivery the way a receiver does and names the rule it fails, with the fix:
wrong secret, re-serialized body, stale timestamp (with the skew), v1-only, missing prefix,
whitespace in the secret, missing headers.`,
    flags: {
      headers: {
        type: 'string',
        value: 'FILE',
        section: 'Input',
        help: 'headers as JSON ({"svc-webhook-id": "..."}) or "Name: value" lines\n(curl -v output and "svc-webhooks sign" output work too)',
      },
      body: { type: 'string', value: 'FILE', section: 'Input', help: 'the body, byte for byte as received' },
      request: { type: 'string', value: 'FILE', section: 'Input', help: 'a raw HTTP request: request line, headers, blank line, body' },
      tolerance: { type: 'string', value: 'SECONDS', help: 'timestamp tolerance (default 300)' },
      'allow-v1': { type: 'boolean', help: 'accept a delivery signed with v1 only, as a receiver with allowV1: true' },
      now: { type: 'string', value: 'UNIX_SECONDS', help: 'check the timestamp against this time instead of now (for old captures)' },
      ...SECRET_FLAGS,
    },
    examples: ['npx svc-webhooks verify --request request.http --now 1795322062'],
    exitCodes: '0 verifies, 1 refused (the rule and the fix are printed), 2 usage error.',
  },
  async ({ values }, io) => {
    let headers: CapturedHeaders
    let body: Uint8Array
    let notes: string[] = []
    let target: string | undefined
    if (values.request !== undefined) {
      if (values.headers !== undefined || values.body !== undefined) throw new UsageError('give either --request, or --headers and --body.')
      ;({ headers, body, notes, target } = parseRawRequest(readBytes(values.request, '--request')))
    } else {
      if (values.headers === undefined || values.body === undefined) {
        throw new UsageError('give the captured request: --headers FILE and --body FILE, or --request FILE.')
      }
      headers = parseHeaders(readText(values.headers, '--headers'))
      body = readBytes(values.body, '--body')
    }
    const { secret, source } = readSecret(values, io)
    const result = await diagnose(headers, body, {
      secret,
      secretSource: source,
      target,
      toleranceSeconds: integer(values.tolerance, '--tolerance', 300),
      allowV1: values['allow-v1'] ?? false,
      nowSeconds: values.now === undefined ? undefined : integer(values.now, '--now', 0, { min: 0 }),
    })

    const lines: string[] = []
    if (result.ok) {
      lines.push(`verified: delivery ${result.id} (${result.eventType}, ${result.signatureVersion} signature)`)
    } else if (result.code === 'invalid_secret') {
      lines.push('refused: the receiver would not start with this secret (see "whitespace in the secret")')
    } else {
      const code = result.code ?? 'invalid_signature'
      lines.push(`refused: ${code} (a receiver answers ${result.status ?? ANSWERS[code].status})`)
    }
    lines.push('')
    for (const check of result.checks) lines.push(`  ${check.notRun ? '--  ' : check.ok ? 'ok  ' : 'FAIL'}  ${check.rule.padEnd(10)} ${check.detail}`)
    for (const note of notes) lines.push(`  note  ${note}`)
    for (const finding of result.findings) {
      lines.push('', `${finding.cause}:`, `  why: ${finding.why}`, `  fix: ${finding.fix}`)
    }
    io.out(`${lines.join('\n')}\n`)
    return result.ok ? EXIT.ok : EXIT.failed
  },
)
