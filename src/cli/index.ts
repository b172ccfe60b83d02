#!/usr/bin/env node
/**
 * The `svc-webhooks` bin: dispatches to send, sign, verify and doctor, maps errors to the exit
 * codes (0 ok, 1 check failed, 2 usage error) and never prints a secret.
 */
import { doctorCommand, DOCTOR_HELP } from './doctor.js'
import { sendCommand, SEND_HELP } from './send.js'
import { EXIT, UsageError, type Io } from './shared.js'
import { signCommand, SIGN_HELP } from './sign.js'
import { verifyCommand, VERIFY_HELP } from './verify.js'

const HELP = `Usage: svc-webhooks <command> [options]

Commands:
  send <url>     POST a signed sample delivery to your receiver, as the service does
  sign           print the signed headers for a body (curl flags or JSON)
  verify         check a captured request and say which rule fails and how to fix it
  doctor <url>   check a live receiver against the service's delivery rules (for CI)

Run "svc-webhooks <command> --help" for its options.

The secret is read from $SVC_WEBHOOK_SECRET (or --secret-env NAME, --secret-file PATH).

Exit codes:
  0  ok: delivered (2xx), verified, or every doctor check passed
  1  a check failed: refused or no answer, does not verify, a doctor row failed
  2  usage error: unknown command or flag, missing argument or secret, unreadable file`

const COMMANDS: Record<string, { run: (argv: string[], io: Io) => Promise<number>; help: string }> = {
  send: { run: sendCommand, help: SEND_HELP },
  sign: { run: signCommand, help: SIGN_HELP },
  verify: { run: verifyCommand, help: VERIFY_HELP },
  doctor: { run: doctorCommand, help: DOCTOR_HELP },
}

/**
 * Runs the CLI with `argv` (without `node` and the script) and returns the exit code.
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2), io)
 */
async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(`${HELP}\n`)
    return name === undefined ? EXIT.usage : EXIT.ok
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (command === undefined) {
    io.err(`svc-webhooks: unknown command "${name}". Commands: send, sign, verify, doctor (svc-webhooks --help).\n`)
    return EXIT.usage
  }
  try {
    return await command.run(rest, io)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`svc-webhooks ${name}: ${error.message}\nRun "svc-webhooks ${name} --help" for usage.\n`)
      return EXIT.usage
    }
    throw error
  }
}

const io: Io = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  env: process.env,
  stdinIsTTY: process.stdin.isTTY === true,
  stdin: async () => {
    const chunks: Buffer[] = []
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
    return new Uint8Array(Buffer.concat(chunks))
  },
}

main(process.argv.slice(2), io).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    // Unexpected: print the message only (an error here never holds the secret, but a stack adds nothing for users).
    process.stderr.write(`svc-webhooks: ${(error as Error)?.message ?? String(error)}\n`)
    process.exitCode = EXIT.failed
  },
)
