/**
 * How a CLI command is declared and run: one definition holds its flags (with their help text),
 * positionals, description, examples and exit codes; the help is generated from it; the command
 * line is parsed with node:util `parseArgs`, and a mistake in it becomes a {@link UsageError} that
 * names the flag and shows the command's usage. Also the exit codes, and the helpers that turn a
 * flag's value into a number, a URL or a file's bytes.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { printable } from '../log-window.js'
import { SECRET_PREFIX } from '../options.js'

/** Exit codes, the same for every command (documented in `svc-webhooks --help`). */
export const EXIT = {
  /** The command did what was asked: delivered (2xx), verified, every doctor check passed. */
  ok: 0,
  /** A check failed: the receiver refused or did not answer, the captured request does not verify, a doctor row failed. */
  failed: 1,
  /** Usage error: unknown flag, missing argument or secret, unreadable file. Nothing was sent. */
  usage: 2,
} as const

/** A mistake in how the command was called: exit 2. `usage` is printed under the message when the command line itself is wrong. */
export class UsageError extends Error {
  override readonly name = 'UsageError'

  constructor(message: string, readonly usage?: string) {
    super(message)
  }
}

/** Where a command writes; tests and the entry point pass process streams. */
export interface Io {
  out: (text: string) => void
  err: (text: string) => void
  env: Record<string, string | undefined>
  stdin: () => Promise<Uint8Array>
  stdinIsTTY: boolean
}

/** One flag: its type, the placeholder of its value in the help (`FILE`), its help, and its help section (default Options). */
export interface Flag {
  type: 'string' | 'boolean'
  value?: string
  help: string
  section?: string
}

export type Flags = Record<string, Flag>

/** The parsed values of `F`: a string flag gives a string, a boolean flag `true`; absent ones are undefined. */
export type Values<F extends Flags> = { [K in keyof F]?: F[K]['type'] extends 'boolean' ? boolean : string }

/** Everything `svc-webhooks <name> --help` shows, and what the parser accepts. */
export interface CommandDefinition<F extends Flags = Flags> {
  name: string
  /** Its line in `svc-webhooks --help`. */
  summary: string
  /** What follows `svc-webhooks <name>` on each usage line, e.g. `<url> [options]`. */
  usage: string[]
  /** The positional arguments, in order, as named in `usage`; a last one ending in `...` takes any number. */
  positionals?: string[]
  description: string
  flags: F
  examples?: string[]
  /** The line after `Exit codes:`. */
  exitCodes: string
}

/** A command, ready for the entry point: `run` parses the arguments after its name and returns the exit code. */
export interface Command extends CommandDefinition {
  help: string
  run: (argv: string[], io: Io) => Promise<number>
}

/**
 * Declares a command: its definition, and the function that runs it with the parsed flags.
 *
 * @example
 * export const hello = defineCommand(
 *   { name: 'hello', summary: 'greets', usage: ['[--loud]'], description: 'Says hello.',
 *     flags: { loud: { type: 'boolean', help: 'in capitals' } }, exitCodes: '0 greeted.' },
 *   async ({ values }, io) => (io.out(values.loud ? 'HELLO\n' : 'hello\n'), EXIT.ok),
 * )
 */
export function defineCommand<F extends Flags>(
  definition: CommandDefinition<F>,
  run: (args: { values: Values<F>; positionals: string[] }, io: Io) => Promise<number>,
): Command {
  const { name, usage, description, flags, examples = [], exitCodes } = definition
  const usageLines = usage.map((line, i) => `${i === 0 ? 'Usage: ' : '       '}svc-webhooks ${name} ${line}`).join('\n')
  const example = examples.length === 0 ? [] : [`Example${examples.length > 1 ? 's' : ''}:\n${examples.join('\n').replace(/^/gm, '  ')}`]
  const help = [usageLines, description, renderFlags(flags), ...example, `Exit codes: ${exitCodes}`].join('\n\n')
  const shortUsage = `${usageLines}\n\n${renderFlags(flags)}\n\nRun "svc-webhooks ${name} --help" for more.`
  return {
    ...definition,
    help,
    async run(argv, io) {
      const parsed = parse(definition, argv, shortUsage)
      if (parsed !== 'help') return run(parsed, io)
      io.out(`${help}\n`)
      return EXIT.ok
    },
  }
}

/**
 * A command group (`svc-webhooks <group> <action> ...`): prints `help` for no action (exit 2) or
 * for `help`/`--help` (exit 0), refuses an unknown action, and runs the named one, turning the
 * UsageError it throws into its message and usage (exit 2). Each action is a command named
 * `<group> <action>`.
 */
export function actionGroup(definition: CommandDefinition & { help: string }, actions: readonly Command[]): Command {
  const group = definition.name
  const actionName = (c: Command) => c.name.slice(`${group} `.length)
  return {
    ...definition,
    async run(argv, io) {
      const [name, ...rest] = argv
      if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
        io.out(`${definition.help}\n`)
        return name === undefined ? EXIT.usage : EXIT.ok
      }
      const action = actions.find((c) => actionName(c) === name)
      if (action === undefined) {
        // The name is whatever was typed: escaped and capped so it cannot forge a line of output.
        io.err(`svc-webhooks ${group}: unknown action "${printable(name, 40)}". Actions: ${actions.map(actionName).join(', ')}.\n`)
        return EXIT.usage
      }
      try {
        return await action.run(rest, io)
      } catch (error) {
        if (!(error instanceof UsageError)) throw error
        if (error.usage !== undefined) io.err(`${error.message}\n\n${error.usage}\n`)
        else io.err(`svc-webhooks ${action.name}: ${error.message}\nRun "svc-webhooks ${action.name} --help" for usage.\n`)
        return EXIT.usage
      }
    },
  }
}

/** parseArgs, after a lenient pass over its tokens that turns each kind of mistake into a message naming the flag. */
function parse<F extends Flags>({ name, flags, positionals: allowed = [] }: CommandDefinition<F>, argv: string[], usage: string) {
  const options = { help: { type: 'boolean' as const, short: 'h' }, ...Object.fromEntries(Object.entries(flags).map(([k, f]) => [k, { type: f.type }])) }
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true })
  if (tokens.some((t) => t.kind === 'option' && t.name === 'help')) return 'help'
  const where = `for \`svc-webhooks ${name}\``
  let positionals = 0
  // A last positional named `<id>...` takes any number of values.
  const variadic = allowed.at(-1)?.endsWith('...') === true
  for (const token of tokens) {
    let problem: string | undefined
    if (token.kind === 'positional' && ++positionals > allowed.length && !variadic) {
      problem = `unexpected argument ${quoted(token.value)} ${where} (it takes ${allowed.length === 0 ? 'none' : allowed.join(' ')})`
    } else if (token.kind === 'option') {
      const flag = Object.hasOwn(flags, token.name) ? flags[token.name] : undefined
      if (flag === undefined) problem = `unknown option ${token.rawName} ${where}`
      else if (flag.type === 'boolean' && token.inlineValue) problem = `${token.rawName} takes no value ${where}`
      // parseArgs' strict rule: a value that looks like a flag is a forgotten value.
      else if (flag.type === 'string' && (token.value === undefined || (!token.inlineValue && token.value.length > 1 && token.value.startsWith('-')))) {
        problem = `${token.rawName} needs a value ${where}: ${token.rawName} ${flag.value ?? 'VALUE'}`
      }
    }
    if (problem !== undefined) throw new UsageError(problem, usage)
  }
  const { values, positionals: args } = parseArgs({ args: argv, options, strict: true, allowPositionals: allowed.length > 0 })
  return { values: values as Values<F>, positionals: args }
}

/** The flags by section: `--name VALUE` in a column, the help beside it (its line breaks indented to the column). */
function renderFlags(flags: Flags): string {
  const entries = Object.entries(flags).map(([name, f]) => ({ label: `--${name}${f.value ? ` ${f.value}` : ''}`, section: 'Options', ...f }))
  const column = Math.max(19, ...entries.map((e) => e.label.length)) + 4
  return [...new Set(entries.map((e) => e.section))]
    .map((section) => {
      const lines = entries.filter((e) => e.section === section).map((e) => `  ${e.label.padEnd(column - 2)}${e.help.replace(/\n/g, `\n${' '.repeat(column)}`)}`)
      return `${section}:\n${lines.join('\n')}`
    })
    .join('\n\n')
}

// Flag values: each turns a string from the command line into what the command needs, or a UsageError.

/** A value from the command line, quoted for a message; not shown when it looks like a secret pasted in the wrong place. */
function quoted(value: string): string {
  return value.includes(SECRET_PREFIX) ? '(a value that looks like a secret, not shown)' : `"${value}"`
}

/** A whole number from a flag, at least `min`, or `fallback` when the flag is absent. */
export function integer(value: string | undefined, flag: string, fallback: number, { min = 1 } = {}): number {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    throw new UsageError(`${flag} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got ${quoted(value)}.`)
  }
  return n
}

/** An http(s) URL from a positional argument or flag. */
export function httpUrl(value: string | undefined, what: string): URL {
  if (value === undefined) throw new UsageError(`${what} is required.`)
  // `localhost:3000/webhooks/svc` parses as a URL of scheme "localhost:": name the missing scheme.
  const hint = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? '' : ` Add the scheme: ${addScheme(value)}`
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new UsageError(`${what} is not a URL: ${quoted(value)}.${hint}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`${what} must start with http:// or https://.${hint}`)
  return url
}

/** `value` with the scheme a receiver at that host most likely has: http:// on this machine, https:// elsewhere. */
function addScheme(value: string): string {
  const scheme = /^(localhost|127\.|\[::1\]|0\.0\.0\.0)/i.test(value) ? 'http://' : 'https://'
  return value.includes(SECRET_PREFIX) ? `${scheme}<the URL>.` : `"${scheme}${value}".`
}

const FILE_ERRORS: Record<string, string> = { ENOENT: 'file not found', EACCES: 'permission denied', EPERM: 'permission denied', EISDIR: 'is a directory, not a file' }

/** A file's exact bytes; an unreadable file is a usage error that says why, with its path. */
export function readBytes(path: string, flag: string): Uint8Array {
  try {
    return new Uint8Array(readFileSync(path))
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException
    const absolute = resolve(path)
    throw new UsageError(`${flag}: ${(code && FILE_ERRORS[code]) ?? code ?? message}: ${path}${absolute === path ? '' : ` (${absolute})`}`)
  }
}

/** A file's text (UTF-8). */
export function readText(path: string, flag: string): string {
  return new TextDecoder().decode(readBytes(path, flag))
}
