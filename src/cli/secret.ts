/**
 * The secrets for the commands that sign or verify: from an environment variable (default
 * SVC_WEBHOOK_SECRET), a file, or the command line with a warning. `doctor` also takes another
 * tenant's secret the same three ways (`--other-secret-env`, `--other-secret-file`,
 * `--other-secret`), to check a receiver of many endpoints refuses it. A value is never printed,
 * not even in an error about where it was looked for.
 */
import { SECRET_PREFIX } from '../options.js'
import { readText, UsageError, type Flag, type Io } from './command.js'

const DEFAULT_ENV = 'SVC_WEBHOOK_SECRET'

type StringFlag = Flag & { type: 'string' }

/** The three ways to give a secret, as flags named after `name`: `--NAME-env`, `--NAME-file`, `--NAME`. */
function secretFlags<N extends string>(name: N, section: string, envHelp: string): Record<`${N}-env` | `${N}-file` | N, StringFlag> {
  return {
    [`${name}-env`]: { type: 'string', value: 'NAME', section, help: envHelp },
    [`${name}-file`]: { type: 'string', value: 'PATH', section, help: 'read it from a file (one trailing newline is ignored)' },
    [name]: { type: 'string', value: 'VALUE', section, help: 'on the command line: visible in shell history and the process list (warns)' },
  } as Record<`${N}-env` | `${N}-file` | N, StringFlag>
}

/** The flags every command that signs or verifies takes to find the secret. */
export const SECRET_FLAGS = secretFlags('secret', 'Secret (never printed)', `read it from this environment variable (default ${DEFAULT_ENV})`)

/**
 * `doctor`'s flags for another tenant's secret (one receiver, many endpoints): a delivery signed
 * with it must be refused at this endpoint's URL.
 */
export const OTHER_SECRET_FLAGS = secretFlags(
  'other-secret',
  "Another tenant's secret (one receiver, many endpoints; never printed)",
  "read it from this environment variable: the secret of another endpoint\nof the same receiver, which this URL must refuse (401)",
)

type Values<N extends string> = { [K in `${N}-env` | `${N}-file` | N]?: string }

/** Where a secret is read from: the flags' name, and the variable read when none is given (none: the secret is optional). */
interface Source {
  name: string
  defaultEnv?: string
  /** Whose secret it is, for messages. */
  whose: string
}

/** Reads the secret from `--secret-file`, `--secret` or the env var named by `--secret-env`; `source` says where, for messages. */
export function readSecret(values: Values<'secret'>, io: Io): { secret: string; source: string } {
  return read(values as Record<string, string | undefined>, io, { name: 'secret', defaultEnv: DEFAULT_ENV, whose: "the endpoint's secret" })!
}

function read(values: Record<string, string | undefined>, io: Io, { name, defaultEnv, whose }: Source): { secret: string; source: string } | undefined {
  const [envFlag, fileFlag, valueFlag] = [`--${name}-env`, `--${name}-file`, `--${name}`]
  const envName = values[`${name}-env`]
  const file = values[`${name}-file`]
  const secret = values[name]
  if (file !== undefined && secret !== undefined) throw new UsageError(`give the secret one way: ${fileFlag} or ${valueFlag}, not both.`)
  if (file !== undefined) {
    // Files usually end with a newline the secret does not have; anything else is kept for `verify` to diagnose.
    const value = readText(file, fileFlag).replace(/\r?\n$/, '')
    if (value === '') throw new UsageError(`no secret: the file ${file} (${fileFlag}) is empty.`)
    return { secret: value, source: `file ${file}` }
  }
  if (secret !== undefined) {
    const prefer = defaultEnv ?? `${envFlag} NAME`
    io.err(`warning: ${valueFlag} puts the secret in your shell history and the process list; prefer ${prefer} or ${fileFlag}.\n`)
    if (secret === '') throw new UsageError(`no secret: ${valueFlag} is empty.`)
    return { secret, source: valueFlag }
  }
  const variable = envName ?? defaultEnv
  if (variable === undefined) return undefined
  // Not echoed when it is not a variable name or looks like a secret: it may be the secret itself, given by mistake.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(variable) || variable.startsWith(SECRET_PREFIX)) {
    throw new UsageError(`${envFlag} takes the name of an environment variable (letters, digits and _, without $), such as MY_WEBHOOK_SECRET; what was given is not one (not shown, in case it is the secret).`)
  }
  const value = io.env[variable]
  if (value === undefined || value === '') {
    const state = value === '' ? 'empty' : 'not set'
    throw new UsageError(
      envName === undefined
        ? `no secret: $${variable} is ${state}. Set it, or pass ${envFlag} NAME or ${fileFlag} PATH.`
        : `no secret: $${variable} (named by ${envFlag}) is ${state}. Set ${variable} to ${whose}, or pass ${fileFlag} PATH.`,
    )
  }
  return { secret: value, source: `$${variable}` }
}

/** A secret for signing: refused when it has whitespace at either end, warned when unprefixed. */
function checkedForSigning({ secret, source }: { secret: string; source: string }, io: Io): string {
  if (secret.trim() !== secret) {
    throw new UsageError(`the secret from ${source} has leading or trailing whitespace (often a newline copied with it); remove it.`)
  }
  if (!secret.startsWith(SECRET_PREFIX)) {
    io.err(`warning: the secret from ${source} does not start with "${SECRET_PREFIX}"; the service signs with the whole value, prefix included.\n`)
  }
  return secret
}

/** The secret for signing: refused when it has whitespace at either end, warned when unprefixed. */
export function signingSecret(values: Values<'secret'>, io: Io): string {
  return checkedForSigning(readSecret(values, io), io)
}

/** Another tenant's secret for signing (`--other-secret`, `-env`, `-file`), and where it came from; undefined when none was given. */
export function otherSigningSecret(values: Values<'other-secret'>, io: Io): { secret: string; source: string } | undefined {
  const found = read(values as Record<string, string | undefined>, io, { name: 'other-secret', whose: "another tenant's secret (another endpoint of the same receiver)" })
  return found && { secret: checkedForSigning(found, io), source: found.source }
}
