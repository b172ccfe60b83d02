/**
 * The secret for the commands that sign or verify: from an environment variable (default
 * SVC_WEBHOOK_SECRET), a file, or the command line with a warning. Its value is never printed,
 * not even in an error about where it was looked for.
 */
import { SECRET_PREFIX } from '../options.js'
import { readText, UsageError, type Flags, type Io } from './command.js'

const SECTION = 'Secret (never printed)'
const DEFAULT_ENV = 'SVC_WEBHOOK_SECRET'

/** The flags every command that signs or verifies takes to find the secret. */
export const SECRET_FLAGS = {
  'secret-env': { type: 'string', value: 'NAME', section: SECTION, help: `read it from this environment variable (default ${DEFAULT_ENV})` },
  'secret-file': { type: 'string', value: 'PATH', section: SECTION, help: 'read it from a file (one trailing newline is ignored)' },
  secret: { type: 'string', value: 'VALUE', section: SECTION, help: 'on the command line: visible in shell history and the process list (warns)' },
} as const satisfies Flags

type SecretValues = { 'secret-env'?: string; 'secret-file'?: string; secret?: string }

/** Reads the secret from `--secret-file`, `--secret` or the env var named by `--secret-env`; `source` says where, for messages. */
export function readSecret(values: SecretValues, io: Io): { secret: string; source: string } {
  const { 'secret-env': envName, 'secret-file': file, secret } = values
  if (file !== undefined && secret !== undefined) throw new UsageError('give the secret one way: --secret-file or --secret, not both.')
  if (file !== undefined) {
    // Files usually end with a newline the secret does not have; anything else is kept for `verify` to diagnose.
    const value = readText(file, '--secret-file').replace(/\r?\n$/, '')
    if (value === '') throw new UsageError(`no secret: the file ${file} (--secret-file) is empty.`)
    return { secret: value, source: `file ${file}` }
  }
  if (secret !== undefined) {
    io.err('warning: --secret puts the secret in your shell history and the process list; prefer SVC_WEBHOOK_SECRET or --secret-file.\n')
    if (secret === '') throw new UsageError('no secret: --secret is empty.')
    return { secret, source: '--secret' }
  }
  const name = envName ?? DEFAULT_ENV
  // Not echoed when it is not a variable name or looks like a secret: it may be the secret itself, given by mistake.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name.startsWith(SECRET_PREFIX)) {
    throw new UsageError('--secret-env takes the name of an environment variable (letters, digits and _, without $), such as MY_WEBHOOK_SECRET; what was given is not one (not shown, in case it is the secret).')
  }
  const value = io.env[name]
  if (value === undefined || value === '') {
    const state = value === '' ? 'empty' : 'not set'
    throw new UsageError(
      envName === undefined
        ? `no secret: $${name} is ${state}. Set it, or pass --secret-env NAME or --secret-file PATH.`
        : `no secret: $${name} (named by --secret-env) is ${state}. Set ${name} to the endpoint's secret, or pass --secret-file PATH.`,
    )
  }
  return { secret: value, source: `$${name}` }
}

/** The secret for signing: refused when it has whitespace at either end, warned when unprefixed. */
export function signingSecret(values: SecretValues, io: Io): string {
  const { secret, source } = readSecret(values, io)
  if (secret.trim() !== secret) {
    throw new UsageError(`the secret from ${source} has leading or trailing whitespace (often a newline copied with it); remove it.`)
  }
  if (!secret.startsWith(SECRET_PREFIX)) {
    io.err(`warning: the secret from ${source} does not start with "${SECRET_PREFIX}"; the service signs with the whole value, prefix included.\n`)
  }
  return secret
}
