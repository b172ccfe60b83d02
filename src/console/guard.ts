/**
 * What stands between a request and the console: the response headers every answer carries (a
 * strict Content-Security-Policy, no framing, no caching, no referrer), the refusal (no page
 * content at all), and the CSRF guard of every action: the request's Origin must be the
 * console's own, and its form must carry a token the console signed for this operator's
 * credentials (their Cookie and Authorization headers) within the last two hours.
 */

const TOKEN_WINDOW_MS = 60 * 60 * 1000
const encoder = new TextEncoder()

/** The headers of every console answer; `nonce` allows the page's one inline style sheet. */
export function securityHeaders(nonce?: string): Record<string, string> {
  return {
    'content-security-policy': `default-src 'none'; style-src ${nonce ? `'nonce-${nonce}'` : "'none'"}; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with the console's own forms.
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
  }
}

/** A refusal: the status and one word, nothing of any page. */
export function refusal(status: number, headers: Record<string, string> = {}): Response {
  return new Response(status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : status === 405 ? 'Method Not Allowed' : 'Refused', {
    status,
    headers: { ...securityHeaders(), 'content-type': 'text/plain; charset=utf-8', ...headers },
  })
}

/** A fresh nonce per response. */
export function nonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, '')
}

const hex = (buffer: ArrayBuffer): string => Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('')

/** Signs and checks the actions' tokens; `secret` shared by every process behind one address, or drawn at start. */
export class CsrfGuard {
  private key: Promise<CryptoKey> | undefined

  constructor(private readonly secret: string | undefined, private readonly now: () => number) {}

  private hmacKey(): Promise<CryptoKey> {
    const raw = this.secret === undefined ? crypto.getRandomValues(new Uint8Array(32)) : encoder.encode(this.secret)
    return (this.key ??= crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']))
  }

  private async sign(request: Request, window: number): Promise<string> {
    const who = `${request.headers.get('cookie') ?? ''}\n${request.headers.get('authorization') ?? ''}`
    return hex(await crypto.subtle.sign('HMAC', await this.hmacKey(), encoder.encode(`${window}\n${who}`)))
  }

  /** The token to put in this operator's forms. */
  token(request: Request): Promise<string> {
    return this.sign(request, Math.floor(this.now() / TOKEN_WINDOW_MS))
  }

  /** Whether `token` was signed for this operator in this window or the one before. */
  async check(request: Request, token: string | null): Promise<boolean> {
    if (typeof token !== 'string' || token.length !== 64) return false
    const window = Math.floor(this.now() / TOKEN_WINDOW_MS)
    for (const w of [window, window - 1]) if (equal(await this.sign(request, w), token)) return true
    return false
  }
}

/** Constant-time comparison of two strings of the same length. */
function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/**
 * Whether a POST comes from the console's own pages: its Origin (sent by every browser on a
 * POST) is the request's own origin or one of `allowed`; a request without one is refused, and
 * so is `Sec-Fetch-Site: cross-site`.
 */
export function sameOrigin(request: Request, allowed: readonly string[]): boolean {
  const origin = request.headers.get('origin')
  if (origin === null || origin === 'null') return false
  if (request.headers.get('sec-fetch-site') === 'cross-site') return false
  const own = new URL(request.url).origin
  return origin === own || allowed.includes(origin)
}
