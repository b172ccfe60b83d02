/**
 * `watchEndpoint`: the service's own view of an endpoint (spec/service-api.md §2.1, §3.2), read
 * at start and every interval, because the service counts failures the receiver never sees (a
 * process that is down, timeouts, TLS) and disables the endpoint at 20 with no way back on its
 * own. It warns as `consecutive_failures` climbs, says why when the endpoint is disabled, and can
 * enable it again once the receiver is ready. `endpointWatcher` makes the receiver's and the
 * inbox worker's `watch` option: the same watch, started by them with their own readiness
 * (readiness.ts). It lives here, not in the core, so a receiver that does not watch pays nothing,
 * not even bytes.
 */
import { errorLabel, printable } from '../log-window.js'
import { resolveLog, type WebhookLog } from '../visibility.js'
import type { EndpointWatch, EndpointWatcher, EndpointWatchView, Readiness } from '../contracts/watch.js'
import { readinessOf } from './readiness.js'
import type { ServiceClient, WebhookEndpoint } from './types.js'

export type { EndpointWatch, EndpointWatcher, EndpointWatchView } from '../contracts/watch.js'

/** Which endpoint to watch, and how: the options {@link watchEndpoint} and {@link endpointWatcher} share. */
export interface EndpointWatchOption {
  /** A client of the service's API: `createServiceClient(...)` from svc-webhooks/service. */
  service: Pick<ServiceClient, 'endpoints'>
  /** The endpoint this receiver serves. */
  endpointId: string
  /**
   * Enable the endpoint again once the service disabled it after failures (`last_error` set,
   * spec §3.2) and this receiver is ready (its store or inbox answers, its secret reads, a signed
   * probe passes its own verification). Never an operator's disable. When the service disables it
   * again after such a re-enable with no delivery delivered in between (a receiver holding a
   * secret other than the service's passes its own probe), it is left disabled until it is
   * enabled by hand.
   * @default false
   */
  reenable?: boolean
  /**
   * How often the endpoint is read, in milliseconds.
   * @default 60000
   */
  intervalMs?: number
}

/** Options of {@link watchEndpoint}. */
export interface WatchEndpointOptions extends EndpointWatchOption {
  /**
   * Whether the receiver behind the endpoint is ready to take deliveries: checked before the
   * endpoint is enabled again, and required with `reenable: true`, so a receiver that would refuse
   * is never handed the deliveries. A throw or a rejection counts as not ready.
   */
  healthy?: () => boolean | Promise<boolean>
  /**
   * The `consecutive_failures` values warned about as the service's count climbs past them
   * (once each, again after it falls back).
   * @default [5, 10, 15]
   */
  warnAt?: readonly number[]
  /**
   * Where the watch's lines go: a function taking one line, or `false` for none.
   * @default console.warn
   */
  log?: WebhookLog
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
}


const DEFAULT_INTERVAL_MS = 60_000
const DEFAULT_WARN_AT = [5, 10, 15]

/** What an API error may say in a line: its name, status and code; the message is the service's text and stays out. */
export function describeApiError(error: unknown): string {
  const { status, code } = (error ?? {}) as { status?: unknown; code?: unknown }
  return [errorLabel(error), typeof status === 'number' ? status : '', typeof code === 'string' ? printable(code) : ''].filter(Boolean).join(' ')
}

/** Checks the options every watch shares; throws a TypeError naming the one that is wrong. */
function checkWatchOption(option: EndpointWatchOption, where: string): void {
  if (typeof option !== 'object' || option === null) throw new TypeError(`svc-webhooks: ${where} takes { service, endpointId }.`)
  if (typeof option.service?.endpoints?.list !== 'function' || typeof option.service.endpoints.enable !== 'function') {
    throw new TypeError(`svc-webhooks: ${where} \`service\` must be a service client: createServiceClient({ baseUrl, token, businessId }) from svc-webhooks/service.`)
  }
  if (typeof option.endpointId !== 'string' || option.endpointId.length === 0) throw new TypeError(`svc-webhooks: ${where} \`endpointId\` must be the endpoint's id.`)
  const { intervalMs } = option
  if (intervalMs !== undefined && (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0)) {
    throw new TypeError(`svc-webhooks: ${where} \`intervalMs\` must be a positive number of milliseconds (default 60000).`)
  }
}

/**
 * Reads an endpoint at start and every `intervalMs`: warns as the service's
 * `consecutive_failures` climbs past 5, 10 and 15, logs `last_error` once when the endpoint is
 * disabled, and with `reenable: true` enables it again once `healthy()` resolves true, if the
 * service disabled it (`last_error` set), not an operator, and at most once per failed cycle
 * (see `reenable`). The timer is unref'd, so a watch never keeps a process up; `stop()` ends it.
 *
 * @example
 * const watch = watchEndpoint({
 *   service: createServiceClient({ baseUrl, token: process.env.SVC_API_TOKEN!, businessId }),
 *   endpointId: process.env.SVC_ENDPOINT_ID!,
 *   reenable: true,
 *   healthy: async () => (await fetch('http://127.0.0.1:3000/ready')).ok,
 * })
 * app.get('/health', (_req, res) => res.json(watch.view()))
 */
export function watchEndpoint(options: WatchEndpointOptions): EndpointWatch {
  checkWatchOption(options, 'watchEndpoint')
  const { healthy } = options
  if (healthy !== undefined && typeof healthy !== 'function') throw new TypeError('svc-webhooks: watchEndpoint `healthy` must be a function resolving true when the receiver is ready.')
  if (options.reenable && !healthy) {
    throw new TypeError('svc-webhooks: watchEndpoint `reenable: true` needs `healthy`, so a receiver that would refuse is never re-enabled (the receiver\'s own `watch` option supplies it).')
  }
  const warnAt = options.warnAt ?? DEFAULT_WARN_AT
  if (!Array.isArray(warnAt) || warnAt.some((n) => !Number.isInteger(n) || n <= 0)) throw new TypeError('svc-webhooks: watchEndpoint `warnAt` must be positive whole numbers, e.g. [5, 10, 15].')
  const readiness: Readiness | undefined = healthy && (async () => ((await healthy()) === true ? undefined : 'healthy() did not resolve true'))
  return startWatch(options, readiness, resolveLog(options.log), warnAt, options.now)
}

/**
 * The `watch` option of a receiver or an inbox worker: the receiver's own readiness decides the
 * re-enable (its store or inbox answers, its secret reads, a probe signed with its current secret
 * passes its own verification, never its handlers), its lines go to the receiver's `log`, and its
 * view is `stats().endpoint` (the worker's `endpoint`). The receiver's `close()` and the worker's
 * `stop()` end it; its timer is unref'd either way.
 *
 * @example
 * const service = createServiceClient({ baseUrl, token: process.env.SVC_API_TOKEN!, businessId })
 * createServer(createNodeHandler({
 *   secret: source,
 *   store: new RedisStore({ client: redis }),
 *   on,
 *   watch: endpointWatcher({ service, endpointId: process.env.SVC_ENDPOINT_ID!, reenable: true }),
 * }))
 */
export function endpointWatcher(option: EndpointWatchOption & Pick<WatchEndpointOptions, 'warnAt' | 'now'>): EndpointWatcher {
  checkWatchOption(option, 'endpointWatcher')
  const { warnAt, now } = option
  return { start: (parts, log) => startWatch(option, readinessOf(parts), log, warnAt, now) }
}

/** The watch itself, for {@link watchEndpoint} and {@link endpointWatcher}. */
function startWatch(
  option: EndpointWatchOption,
  readiness: Readiness | undefined,
  log: ((line: string) => void) | undefined,
  warnAt: readonly number[] = DEFAULT_WARN_AT,
  now: () => number = Date.now,
): EndpointWatch {
  const { service, endpointId, reenable = false, intervalMs = DEFAULT_INTERVAL_MS } = option
  const say = (text: string): void => {
    try {
      log?.(`svc-webhooks: endpoint ${printable(endpointId)}: ${text}`)
    } catch {
      // A throwing log never stops the watch.
    }
  }
  const view: EndpointWatchView = { endpointId }
  /** The highest of `warnAt` already warned about in this climb. */
  let warned = 0
  let disabledSaid = false
  let notReadySaid = false
  let leftSaid = false
  let failing = false
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  /**
   * `last_error` and the streak as last read while the endpoint was enabled. The service may keep
   * an earlier disable's `last_error` after an enable, so a disable that shows that same error
   * without a single failure more is not the service's: deliveries only fail while enabled.
   */
  let enabledSeen: { lastError: string | null; failures: number } | undefined
  /** This watch's last re-enable, until a delivery is seen to succeed after it. */
  let ours: { lastDelivery: string | null; failed: boolean } | undefined
  /**
   * Set once the service disabled the endpoint again after this watch enabled it, with no
   * delivery delivered in between: the readiness check passed but the service's deliveries still
   * fail (a receiver holding a secret other than the service's passes a probe signed with its
   * own). Re-enabling again would only fail 20 more each interval; an enable by someone else
   * clears it.
   */
  let heldBack = false

  /** Whether the service disabled the endpoint after failures (§3.2: `last_error` set), not an operator. */
  function disabledByService(endpoint: WebhookEndpoint): boolean {
    if (endpoint.last_error === null) return false
    return !(enabledSeen && enabledSeen.lastError === endpoint.last_error && endpoint.consecutive_failures <= enabledSeen.failures)
  }

  async function read(): Promise<void> {
    let found: WebhookEndpoint
    try {
      found = await readEndpoint()
    } catch (error) {
      if (stopped) return
      view.error = error instanceof Error && error.name === 'EndpointNotFound' ? 'not in the service\'s list' : `reading it failed: ${describeApiError(error)}`
      if (!failing) say(`${view.error} (deleted, or another business-id?); trying again every ${intervalMs / 1000} s.`)
      failing = true
      return
    }
    if (stopped) return
    if (failing) say('the service answers again.')
    failing = false
    delete view.error
    view.enabled = found.enabled
    view.consecutiveFailures = found.consecutive_failures
    view.lastError = found.last_error
    view.lastReadAt = now()
    const crossed = Math.max(0, ...warnAt.filter((n) => found.consecutive_failures >= n))
    if (crossed > warned && found.enabled) {
      say(
        `the service counts ${found.consecutive_failures} consecutive failed deliveries; it disables the endpoint at 20 (spec §6.3). ` +
          'It also counts failures this process never sees: other processes, timeouts, a process that is down.',
      )
    }
    warned = found.enabled ? crossed : Math.max(warned, crossed)
    if (found.enabled) {
      enabledSeen = { lastError: found.last_error, failures: found.consecutive_failures }
      // Enabled while this watch held back: someone enabled it by hand, after fixing the cause.
      heldBack = false
      if (ours) {
        // A failure seen after the re-enable, then a streak of 0 again, or a newer delivery with
        // no failure since: a delivery got through, so the re-enable held.
        if (found.consecutive_failures > 0) ours.failed = true
        else if (ours.failed || found.last_delivery_at !== ours.lastDelivery) ours = undefined
      }
      disabledSaid = notReadySaid = leftSaid = false
      delete view.heldBack
      delete view.disabledBy
      return
    }
    if (!disabledByService(found)) {
      // An operator's disable (PATCH enabled: false) is deliberate: never undone here.
      view.disabledBy = 'operator'
      if (!leftSaid) {
        leftSaid = true
        say(
          `disabled, not by the service's failure rule (last_error: ${found.last_error === null ? 'none' : `${printable(found.last_error, 200)}, from an earlier disable`}): ` +
            'a deliberate disable, left as it is' + (reenable ? ' (reenable only undoes the service\'s own).' : '.') + ' `svc-webhooks endpoints enable` ends it.',
        )
      }
      return
    }
    view.disabledBy = 'service'
    if (ours) {
      // Disabled again since this watch enabled it. A `last_delivery_at` that moved says a
      // delivery got through in between, even one no read saw (the emulator sets it on a 2xx;
      // §2.1 does not say more); otherwise the re-enable did not help.
      heldBack = found.last_delivery_at === ours.lastDelivery
      ours = undefined
    }
    if (!disabledSaid) {
      disabledSaid = true
      say(
        `disabled by the service (last_error: ${printable(found.last_error, 200)}). It receives nothing until enabled again` +
          (!reenable ? ': `watch: { reenable: true }`, or `svc-webhooks endpoints enable`.' : heldBack ? '.' : '; it will be, once this receiver is ready.'),
      )
    }
    if (!reenable) return
    if (heldBack) {
      view.error = 'not re-enabled: the service disabled it again after this watch enabled it, with no delivery delivered in between'
      view.heldBack = true
      if (!notReadySaid) {
        say(
          'not enabled again: the service disabled it again after this watch enabled it, and no delivery got through in between. ' +
            'This receiver passes its own readiness check (its store, its secret, a probe signed with its own secret), yet the ' +
            'service\'s deliveries fail: most often a secret other than the service\'s (each delivery refused 401, dropped by the ' +
            'sender; see the refusal lines). Each re-enable would fail 20 more, so the watch leaves it disabled until it is ' +
            'enabled by hand (`svc-webhooks endpoints enable`, after fixing the cause), then watches again.',
        )
      }
      notReadySaid = true
      return
    }
    const why = await readiness!().catch((error: unknown) => `the readiness check threw (${errorLabel(error)})`)
    if (stopped) return
    if (why !== undefined) {
      view.error = `not re-enabled: ${why}`
      if (!notReadySaid) say(`not enabled again yet: this receiver is not ready (${why}). Checking every ${intervalMs / 1000} s.`)
      notReadySaid = true
      return
    }
    try {
      // Read again just before the enable: an operator may have acted while the checks ran
      // (§4.1 has no conditional PATCH, so this only narrows the window to one round trip).
      const again = await readEndpoint()
      if (stopped || again.enabled || !disabledByService(again)) return
      const enabled = await service.endpoints.enable(endpointId)
      ours = { lastDelivery: enabled.last_delivery_at ?? again.last_delivery_at, failed: false }
      // Seen enabled, by this very answer: a disable right after it shows whether a failure came first.
      enabledSeen = { lastError: enabled.last_error, failures: enabled.consecutive_failures }
      view.enabled = enabled.enabled
      view.consecutiveFailures = enabled.consecutive_failures
      view.reenabledAt = now()
      warned = 0
      disabledSaid = notReadySaid = false
      say(
        'enabled again: this receiver is ready. Deliveries created while it was disabled are kept by the service but cannot be listed (§4.1): ' +
          'resend them by id (`svc-webhooks endpoints resend`).',
      )
    } catch (error) {
      view.error = `enabling it failed: ${describeApiError(error)}`
      say(`${view.error}; trying again in ${intervalMs / 1000} s.`)
    }
  }

  /** The endpoint as the service shows it: §4.1 has no read of one endpoint, the list has them all. */
  async function readEndpoint(): Promise<WebhookEndpoint> {
    const found = (await service.endpoints.list()).find((e) => e.id === endpointId)
    if (!found) throw Object.assign(new Error('not in the list'), { name: 'EndpointNotFound' })
    return found
  }

  function tick(): void {
    if (stopped) return
    void read().finally(() => {
      if (stopped) return
      timer = setTimeout(tick, intervalMs)
      ;(timer as { unref?: () => void }).unref?.()
    })
  }
  tick()

  return {
    stop() {
      stopped = true
      clearTimeout(timer)
    },
    view: () => ({ ...view }),
  }
}
