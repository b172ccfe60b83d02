#!/usr/bin/env node
/**
 * The `svc-webhooks` bin: dispatches to send, sign, verify, doctor, endpoints, history and listen, prints the version, maps
 * errors to the exit codes (0 ok, 1 check failed, 2 usage error) and never prints a secret.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { EXIT, UsageError, type Command, type Io } from './command.js'
import { doctor } from './doctor.js'
import { endpoints } from './endpoints.js'
import { history } from './history.js'
import { listen } from './listen.js'
import { send } from './send.js'
import { sign } from './sign.js'
import { verify } from './verify.js'

const COMMANDS: readonly Command[] = [send, sign, verify, doctor, endpoints, history, listen]

function help(): string {
  const names = COMMANDS.map((c) => [c.name, ...(c.positionals ?? [])].join(' '))
  const width = Math.max(...names.map((n) => n.length)) + 3
  return `Usage: svc-webhooks <command> [options]

Commands:
${COMMANDS.map((c, i) => `  ${names[i]!.padEnd(width)}${c.summary}`).join('\n')}

Run "svc-webhooks <command> --help" for its options, "svc-webhooks --version" for the version.

The secret is read from $SVC_WEBHOOK_SECRET (or --secret-env NAME, --secret-file PATH).
"endpoints" and "listen" talk to the service: $SVC_API_URL, $SVC_API_TOKEN (never printed), $SVC_BUSINESS_ID.

Exit codes:
  0  ok: delivered (2xx), verified, or every doctor check passed
  1  a check failed: refused or no answer, does not verify, a doctor row failed,
     the service refused an endpoints call
  2  usage error: unknown command or flag, missing argument or secret, unreadable file`
}

/**
 * This package's version, from the first svc-webhooks package.json above the script node runs
 * (dist/cli.js, through the node_modules/.bin link). Not import.meta.url: the CJS build cannot parse it.
 */
function version(): string | undefined {
  try {
    for (let dir = dirname(realpathSync(process.argv[1] ?? '')), depth = 0; depth < 5; dir = dirname(dir), depth++) {
      const file = join(dir, 'package.json')
      const pkg = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown }) : undefined
      if (pkg?.name === 'svc-webhooks' && typeof pkg.version === 'string') return pkg.version
    }
  } catch {
    // An unreadable script path or package.json: the version is unknown.
  }
  return undefined
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
    io.out(`${help()}\n`)
    return name === undefined ? EXIT.usage : EXIT.ok
  }
  if (name === '--version') {
    const found = version()
    if (found === undefined) {
      io.err('svc-webhooks: the version is unknown: no svc-webhooks package.json above this script.\n')
      return EXIT.failed
    }
    io.out(`${found}\n`)
    return EXIT.ok
  }
  const command = COMMANDS.find((c) => c.name === name)
  if (command === undefined) {
    io.err(`svc-webhooks: unknown command "${name}". Commands: ${COMMANDS.map((c) => c.name).join(', ')} (svc-webhooks --help).\n`)
    return EXIT.usage
  }
  try {
    return await command.run(rest, io)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    if (error.usage !== undefined) io.err(`${error.message}\n\n${error.usage}\n`)
    else io.err(`svc-webhooks ${name}: ${error.message}\nRun "svc-webhooks ${name} --help" for usage.\n`)
    return EXIT.usage
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
