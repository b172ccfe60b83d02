/**
 * What every CLI command shares: argument parsing with node:util `parseArgs`, the exit codes,
 * reading the secret (env var or file; the command line only with a warning, and it is never
 * printed), reading files and stdin as raw bytes, and POSTing a signed delivery with a timeout.
 */
import { readFileSync } from 'node:fs'
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { SECRET_PREFIX } from '../options.js'
import type { SignedWebhook } from '../testing.js'

/** Exit codes, the same for every command (documented in `svc-webhooks --help`). */
export const EXIT = {
  /** The command did what was asked: delivered (2xx), verified, every doctor check passed. */
  ok: 0,
  /** A check failed: the receiver refused or did not answer, the captured request does not verify, a doctor row failed. */
  failed: 1,
  /** Usage error: unknown flag, missing argument or secret, unreadable file. Nothing was sent. */
  usage: 2,
} as const

/** A mistake in how the command was called: printed with a pointer to `--help`, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** Where a command writes; tests and the entry point pass process streams. */
export interface Io {
  out: (text: string) => void
  err: (text: string) => void
  env: Record<string, string | undefined>
  stdin: () => Promise<Uint8Array>
  stdinIsTTY: boolean
}

/** The options every command that signs or verifies takes to find the secret. */
export const SECRET_OPTIONS = {
  'secret-env': { type: 'string' },
  'secret-file': { type: 'string' },
  secret: { type: 'string' },
} as const satisfies ParseArgsConfig['options']

export const SECRET_HELP = `Secret (never printed):
  --secret-env NAME    read it from this environment variable (default SVC_WEBHOOK_SECRET)
  --secret-file PATH   read it from a file (one trailing newline is ignored)
  --secret VALUE       on the command line: visible in shell history and the process list (warns)`

export const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const satisfies ParseArgsConfig['options']

/** `parseArgs`, with its errors (unknown flag, missing value) turned into a {@link UsageError}. */
export function parse<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config)
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/** Reads the secret from `--secret-file`, `--secret` or the env var named by `--secret-env`. */
export function readSecret(values: { 'secret-env'?: string; 'secret-file'?: string; secret?: string }, io: Io): {
  secret: string
  source: string
} {
  const { 'secret-env': envName = 'SVC_WEBHOOK_SECRET', 'secret-file': file, secret } = values
  if (file !== undefined && secret !== undefined) throw new UsageError('give the secret one way: --secret-file or --secret, not both.')
  let value: string | undefined
  let source: string
  if (file !== undefined) {
    // Files usually end with a newline the secret does not have; anything else is kept for `verify` to diagnose.
    value = readText(file, '--secret-file').replace(/\r?\n$/, '')
    source = `file ${file}`
  } else if (secret !== undefined) {
    io.err('warning: --secret puts the secret in your shell history and the process list; prefer SVC_WEBHOOK_SECRET or --secret-file.\n')
    value = secret
    source = '--secret'
  } else {
    value = io.env[envName]
    source = `$${envName}`
  }
  if (value === undefined || value === '') {
    throw new UsageError(
      `no secret: ${source} is ${value === '' ? 'empty' : 'not set'}. Set SVC_WEBHOOK_SECRET, or pass --secret-env NAME or --secret-file PATH.`,
    )
  }
  return { secret: value, source }
}

/** The secret for signing: refused when it has whitespace at either end, warned when unprefixed. */
export function signingSecret(values: Parameters<typeof readSecret>[0], io: Io): string {
  const { secret, source } = readSecret(values, io)
  if (secret.trim() !== secret) {
    throw new UsageError(`the secret from ${source} has leading or trailing whitespace (often a newline copied with it); remove it.`)
  }
  if (!secret.startsWith(SECRET_PREFIX)) {
    io.err(`warning: the secret from ${source} does not start with "${SECRET_PREFIX}"; the service signs with the whole value, prefix included.\n`)
  }
  return secret
}

/** A file's exact bytes. */
export function readBytes(path: string, flag: string): Uint8Array {
  try {
    return new Uint8Array(readFileSync(path))
  } catch (error) {
    throw new UsageError(`${flag} ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
}

export function readText(path: string, flag: string): string {
  return new TextDecoder().decode(readBytes(path, flag))
}

/** A positive whole number from a flag, or a usage error. */
export function integer(value: string | undefined, flag: string, fallback: number, { min = 1 } = {}): number {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    throw new UsageError(`${flag} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got "${value}".`)
  }
  return n
}

/** An http(s) URL from a positional argument or flag. */
export function httpUrl(value: string | undefined, what: string): URL {
  if (value === undefined) throw new UsageError(`${what} is required.`)
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new UsageError(`${what} is not a URL: "${value}".`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`${what} must be http:// or https://.`)
  return url
}

/** One POST's outcome. `error` is set when no answer came (refused, reset, timed out). */
export interface Answer {
  status: number
  statusText: string
  ms: number
  body: string
  error?: string
}

/** The sender gives up after 10 s (spec/service-api.md §6.3 rule 1). */
export const SENDER_TIMEOUT_MS = 10_000

/** POSTs a signed delivery exactly as signed: the bytes and headers, nothing added but a user agent. */
export async function post(url: URL, signed: Pick<SignedWebhook, 'rawBody' | 'headers'>, timeoutMs: number): Promise<Answer> {
  const started = performance.now()
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'user-agent': 'svc-webhooks-cli', ...signed.headers },
      body: signed.rawBody as BodyInit,
      redirect: 'manual', // the service does not follow redirects to another URL; neither do we
      signal: AbortSignal.timeout(timeoutMs),
    })
    const body = await res.text()
    return { status: res.status, statusText: res.statusText, ms: performance.now() - started, body }
  } catch (error) {
    return { status: 0, statusText: '', ms: performance.now() - started, body: '', error: describeFetchError(error, timeoutMs) }
  }
}

function describeFetchError(error: unknown, timeoutMs: number): string {
  const err = error as Error & { cause?: { code?: string; message?: string } }
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return `no answer within ${timeoutMs / 1000} s`
  return err.cause?.code ?? err.cause?.message ?? err.message
}

/** How the sender reads a status (spec §6.3 rules 1-3). */
export function senderReading(status: number): string {
  if (status >= 200 && status < 300) return 'delivered'
  if (status === 429 || status >= 500) return 'the service would retry it'
  if (status >= 300 && status < 400) return 'not delivered: the service does not follow redirects'
  return 'a permanent refusal: the service would not retry it'
}

/** `text` cut to `max` characters, for printing a receiver's answer. */
export function clip(text: string, max = 500): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length - max} more characters)`
}
