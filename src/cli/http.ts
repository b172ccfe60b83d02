/**
 * POSTing a signed delivery as the service does (the bytes and headers as signed, a timeout, no
 * redirects), and reading what came back the way the sender reads it (spec/service-api.md §6.3):
 * delivered, retried or dropped, or no answer at all and why.
 */
import type { SignedWebhook } from '../signing.js'

/** The sender gives up after 10 s (spec/service-api.md §6.3 rule 1). */
export const SENDER_TIMEOUT_MS = 10_000

/** Why no answer came: `code` as the network reports it, `meaning` what to check. */
export interface NoAnswer {
  code: string
  meaning: string
}

/** One request's outcome. `error` is set when no answer came (refused, reset, timed out). */
export interface Answer {
  status: number
  statusText: string
  ms: number
  body: string
  error?: NoAnswer
}

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
    return { status: 0, statusText: '', ms: performance.now() - started, body: '', error: noAnswer(error, url, timeoutMs) }
  }
}

/** Why a fetch to `url` got no answer, and what to check: a refused connection is not a slow receiver. */
export function noAnswer(error: unknown, url: URL, timeoutMs: number): NoAnswer {
  const err = error as Error & { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }
  if (err.name === 'TimeoutError' || err.name === 'AbortError') {
    return {
      code: `no answer within ${timeoutMs / 1000} s`,
      meaning: 'the service gives up after 10 s and counts a failure: answer within 10 s, moving slow work after a durable write (a queue).',
    }
  }
  const code = err.cause?.code ?? err.cause?.errors?.[0]?.code ?? err.cause?.message ?? err.message
  if (code === 'ECONNREFUSED') return { code, meaning: `nothing is listening at ${url.host}: is the server running, and on this port?` }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return { code, meaning: `the host name ${url.hostname} does not resolve: check its spelling, and DNS.` }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') {
    return { code, meaning: 'the connection was closed without an answer: did the receiver crash, or did a proxy cut the request?' }
  }
  if (/CERT|SSL|TLS|SELF_SIGNED/.test(code)) return { code, meaning: `the TLS handshake with ${url.host} failed: check the certificate (valid, for this host name, with its chain).` }
  return { code, meaning: `the request to ${url.host} failed before an answer came.` }
}

/** How the sender reads a status (spec §6.3 rules 1-3). */
export type Reading = 'delivered' | 'retried' | 'permanent' | 'redirect'

export function readingOf(status: number): Reading {
  if (status >= 200 && status < 300) return 'delivered'
  if (status === 429 || status >= 500) return 'retried'
  if (status >= 300 && status < 400) return 'redirect'
  return 'permanent'
}

const READINGS: Record<Reading, string> = {
  delivered: 'delivered',
  retried: 'the service would retry it',
  redirect: 'not delivered: the service does not follow redirects',
  permanent: 'a permanent refusal: the service would not retry it',
}

/** The sender's reading of `status`, in words. */
export function senderReading(status: number): string {
  return READINGS[readingOf(status)]
}

/** `text` cut to `max` characters, for printing a receiver's answer. */
export function clip(text: string, max = 500): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length - max} more characters)`
}
