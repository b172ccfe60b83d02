/**
 * `svc-webhooks endpoints <action>`: the service's webhook-endpoint API (spec/service-api.md
 * §4.1) from the command line, through `createServiceClient`: list, create, update, enable,
 * disable, delete, rotate, resend (by id, or every refused delivery named in a log) and status.
 * The service is found from $SVC_API_URL, $SVC_API_TOKEN and $SVC_BUSINESS_ID; the token is read
 * from the environment only and never printed, not even with --verbose. A new signing secret is
 * shown once, or written to a file (mode 0600) instead.
 */
import { accessSync, constants, renameSync, statSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import { createServiceClient, isServiceApiError, type ServiceClientOptions } from '../service/client.js'
import type { ServiceClient, WebhookEndpoint } from '../service/types.js'
import { actionGroup, defineCommand, EXIT, httpUrl, readText, UsageError, type Command, type Flag, type Io, type Values } from './command.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const SERVICE_FLAGS = {
  'api-url': { type: 'string', value: 'URL', section: 'Service', help: "the service's base URL (default $SVC_API_URL); /api/v1 is added" },
  'business-id': { type: 'string', value: 'UUID', section: 'Service', help: 'the business to act for (default $SVC_BUSINESS_ID)' },
  json: { type: 'boolean', section: 'Output', help: 'print the answer as JSON' },
  verbose: { type: 'boolean', section: 'Output', help: 'print each HTTP call to stderr (method, path, status, time; never the token)' },
} satisfies Record<string, Flag>

const SECRET_FILE_FLAG = {
  'write-secret-file': {
    type: 'string',
    value: 'PATH',
    help: 'write the new signing secret to PATH (mode 0600, replaced atomically)\ninstead of printing it',
  },
} satisfies Record<string, Flag>

const EXIT_CODES = '0 done, 1 the service refused the call or did not answer, 2 usage error (a flag, or $SVC_API_URL, $SVC_API_TOKEN or $SVC_BUSINESS_ID missing).'
const TOKEN_NOTE = 'The token is read from $SVC_API_TOKEN only (a personal access token, svc_pat_...) and never printed.'

type ServiceValues = Values<typeof SERVICE_FLAGS>

/** The client for the service the flags and environment name; a missing setting is a usage error. */
function service(values: ServiceValues, io: Io): ServiceClient {
  const baseUrl = values['api-url'] ?? io.env.SVC_API_URL
  if (baseUrl === undefined || baseUrl === '') throw new UsageError("no service URL: set SVC_API_URL to the service's base URL, or pass --api-url URL.")
  httpUrl(baseUrl, values['api-url'] === undefined ? '$SVC_API_URL' : '--api-url')
  const token = io.env.SVC_API_TOKEN
  if (token === undefined || token === '') throw new UsageError('no token: set SVC_API_TOKEN to a personal access token (svc_pat_..., from the dashboard). It is read from the environment only.')
  const businessId = values['business-id'] ?? io.env.SVC_BUSINESS_ID
  if (businessId === undefined || businessId === '') throw new UsageError('no business: set SVC_BUSINESS_ID to the business UUID, or pass --business-id UUID.')
  return serviceClient({
    baseUrl,
    token,
    businessId,
    onAttempt: values.verbose
      ? (a) => io.err(`> ${a.method} ${a.path} (attempt ${a.attempt}): ${a.status ?? a.error} in ${a.ms} ms${a.retryInMs === undefined ? '' : `, retrying in ${a.retryInMs} ms`}\n`)
      : undefined,
  })
}

/** The service client, its refusal of an option (a remote http:// URL, say) a usage error. */
export function serviceClient(options: ServiceClientOptions): ServiceClient {
  try {
    return createServiceClient(options)
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/^svc-webhooks: /, ''))
  }
}

/** An endpoint or delivery id from the command line. */
function uuid(value: string | undefined, what: string): string {
  if (value === undefined) throw new UsageError(`${what} is required.`)
  if (!UUID.test(value)) throw new UsageError(`${what} must be a UUID, got "${value.slice(0, 60)}".`)
  return value
}

/** `a,b` as a list; an empty value is the empty list (every event). */
function events(value: string): string[] {
  return value
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)
}

/** Runs a call; a ServiceApiError becomes its message (and the 422 list) on stderr and exit 1. */
async function calling(io: Io, action: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run()
  } catch (error) {
    if (!isServiceApiError(error)) throw error
    io.err(`svc-webhooks endpoints ${action}: ${error.message.replace(/^svc-webhooks: /, '')}\n`)
    for (const issue of error.errors ?? []) io.err(`  ${Array.isArray(issue.loc) ? issue.loc.join('.') : ''}: ${issue.msg}\n`)
    return EXIT.failed
  }
}

const yesNo = (value: boolean) => (value ? 'yes' : 'no')
const eventList = (list: readonly string[]) => (list.length === 0 ? 'all' : list.join(', '))

/** The endpoint as lines; `secret` is printed last, on a line of its own, when given. */
function describe(endpoint: WebhookEndpoint): string {
  return [
    `endpoint ${endpoint.id}${endpoint.label ? ` (${endpoint.label})` : ''}`,
    `  url                   ${endpoint.url}`,
    `  enabled               ${yesNo(endpoint.enabled)}`,
    `  consecutive_failures  ${endpoint.consecutive_failures} (the service disables it at 20)`,
    `  last_error            ${endpoint.last_error ?? 'none'}`,
    `  last_delivery_at      ${endpoint.last_delivery_at ?? 'never'}`,
    `  subscribed_events     ${eventList(endpoint.subscribed_events)}`,
    `  created               ${endpoint.created}`,
  ].join('\n')
}

/** The endpoint without its secret, for printing. */
function withoutSecret(endpoint: WebhookEndpoint): WebhookEndpoint {
  const { signing_secret: _secret, ...rest } = endpoint
  return rest
}

/** Checks, before the service is called, that a secret file can be written: the secret exists only in the answer. */
function checkWritable(path: string): void {
  const absolute = resolve(path)
  try {
    if (statSync(absolute, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`--write-secret-file: ${path} is a directory; give a file path.`)
    accessSync(dirname(absolute), constants.W_OK)
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw new UsageError(`--write-secret-file: cannot write in ${dirname(absolute)} (${(error as NodeJS.ErrnoException).code ?? 'error'}); nothing was changed.`)
  }
}

/**
 * Writes a secret file (`text`: the secret, or a state FileSecretSource reads) with mode 0600: a
 * file beside it first, then renamed over it, so no reader sees half a secret.
 */
export function writeSecretFile(path: string, text: string): void {
  const absolute = resolve(path)
  const temporary = `${absolute}.${process.pid}.tmp`
  writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' })
  renameSync(temporary, absolute)
}

/** Prints a new secret once, or writes it; returns the exit code. */
function handOver(io: Io, json: boolean | undefined, file: string | undefined, endpoint: WebhookEndpoint & { signing_secret: string }, heading: string, again: string): number {
  if (file !== undefined) {
    try {
      writeSecretFile(file, endpoint.signing_secret)
    } catch (error) {
      io.err(
        `svc-webhooks endpoints: the new secret could not be written to ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'}); it is not shown. ` +
          `Get another with: svc-webhooks endpoints rotate ${endpoint.id} --write-secret-file PATH${again}\n`,
      )
      return EXIT.failed
    }
    if (json) io.out(`${JSON.stringify({ ...withoutSecret(endpoint), signing_secret_file: resolve(file) }, null, 2)}\n`)
    else io.out(`${heading}\n${describe(endpoint)}\nsigning secret written to ${resolve(file)} (mode 0600)\n`)
    return EXIT.ok
  }
  if (json) io.out(`${JSON.stringify(endpoint, null, 2)}\n`)
  else io.out(`${heading}\n${describe(endpoint)}\nsigning secret (shown this once; store it now, e.g. as SVC_WEBHOOK_SECRET):\n${endpoint.signing_secret}\n`)
  return EXIT.ok
}

// ---- the actions ------------------------------------------------------------------------------

const list = defineCommand(
  {
    name: 'endpoints list',
    summary: "list the business's webhook endpoints, newest first",
    usage: ['[options]'],
    description: "Lists the business's webhook endpoints, newest first: enabled, the service's failure streak, the URL.",
    flags: SERVICE_FLAGS,
    examples: ['npx svc-webhooks endpoints list --json'],
    exitCodes: EXIT_CODES,
  },
  async ({ values }, io) =>
    calling(io, 'list', async () => {
      const endpoints = await service(values, io).endpoints.list()
      if (values.json) {
        io.out(`${JSON.stringify(endpoints, null, 2)}\n`)
        return EXIT.ok
      }
      if (endpoints.length === 0) {
        io.out('no webhook endpoints (svc-webhooks endpoints create --url URL)\n')
        return EXIT.ok
      }
      const rows = [['ID', 'ENABLED', 'FAILURES', 'EVENTS', 'URL', 'LABEL'], ...endpoints.map((e) => [e.id, yesNo(e.enabled), String(e.consecutive_failures), eventList(e.subscribed_events), e.url, e.label])]
      const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
      io.out(`${rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n')}\n`)
      return EXIT.ok
    }),
)

const create = defineCommand(
  {
    name: 'endpoints create',
    summary: 'register a webhook endpoint; its signing secret is shown once',
    usage: ['--url URL [--label TEXT] [--events a,b] [options]'],
    description: `Registers a webhook endpoint. The answer holds its signing secret, shown this once: it is
printed, or written to --write-secret-file PATH (mode 0600) and not printed. The service may deliver
before the secret reaches your receiver; refused deliveries can be resent (endpoints resend).`,
    flags: {
      url: { type: 'string', value: 'URL', help: 'where the service delivers (https on port 443 for the service)' },
      label: { type: 'string', value: 'TEXT', help: "a name for it (default the URL's host)" },
      events: { type: 'string', value: 'LIST', help: 'comma-separated event types (default: every event, including later ones)' },
      ...SECRET_FILE_FLAG,
      ...SERVICE_FLAGS,
    },
    examples: ['npx svc-webhooks endpoints create --url https://shop.example.com/webhooks/svc --write-secret-file ./webhook-secret'],
    exitCodes: EXIT_CODES,
  },
  async ({ values }, io) => {
    const url = httpUrl(values.url, '--url')
    const file = values['write-secret-file']
    if (file !== undefined) checkWritable(file)
    const client = service(values, io)
    return calling(io, 'create', async () => {
      const endpoint = await client.endpoints.create({ label: values.label ?? url.host, url: url.href, subscribed_events: events(values.events ?? '') })
      return handOver(io, values.json, file, endpoint, `created endpoint ${endpoint.id}`, '')
    })
  },
)

const update = defineCommand(
  {
    name: 'endpoints update',
    summary: "change an endpoint's URL, label or events",
    usage: ['<id> [--url URL] [--label TEXT] [--events a,b] [options]'],
    positionals: ['<id>'],
    description: 'Changes the fields given; the others stay as they are. --events "" subscribes to every event.',
    flags: {
      url: { type: 'string', value: 'URL', help: 'the new URL' },
      label: { type: 'string', value: 'TEXT', help: 'the new label' },
      events: { type: 'string', value: 'LIST', help: 'comma-separated event types ("" for every event)' },
      ...SERVICE_FLAGS,
    },
    examples: ['npx svc-webhooks endpoints update 0b6c... --events message.received'],
    exitCodes: EXIT_CODES,
  },
  async ({ values, positionals }, io) => {
    const id = uuid(positionals[0], 'the endpoint id (svc-webhooks endpoints update <id>)')
    const changes = {
      ...(values.url === undefined ? {} : { url: httpUrl(values.url, '--url').href }),
      ...(values.label === undefined ? {} : { label: values.label }),
      ...(values.events === undefined ? {} : { subscribed_events: events(values.events) }),
    }
    if (Object.keys(changes).length === 0) throw new UsageError('nothing to change: give --url, --label or --events.')
    const client = service(values, io)
    return calling(io, 'update', async () => printEndpoint(io, values.json, 'updated', await client.endpoints.update(id, changes)))
  },
)

function printEndpoint(io: Io, json: boolean | undefined, what: string, endpoint: WebhookEndpoint): number {
  io.out(json ? `${JSON.stringify(withoutSecret(endpoint), null, 2)}\n` : `${what} ${describe(endpoint)}\n`)
  return EXIT.ok
}

/** enable, disable: one PATCH of `enabled`. */
function toggle(enabled: boolean): Command {
  const action = enabled ? 'enable' : 'disable'
  return defineCommand(
    {
      name: `endpoints ${action}`,
      summary: enabled ? 'enable an endpoint again (the service resets its failure streak)' : 'stop deliveries to an endpoint',
      usage: ['<id> [options]'],
      positionals: ['<id>'],
      description: enabled
        ? `Enables the endpoint and resets its consecutive-failure streak (spec §3.2). Deliveries the
service held while it was disabled are not sent by this; resend them by id.`
        : 'Disables the endpoint: the service delivers nothing to it until it is enabled again.',
      flags: SERVICE_FLAGS,
      exitCodes: EXIT_CODES,
    },
    async ({ values, positionals }, io) => {
      const id = uuid(positionals[0], `the endpoint id (svc-webhooks endpoints ${action} <id>)`)
      const client = service(values, io)
      return calling(io, action, async () => printEndpoint(io, values.json, `${action}d`, enabled ? await client.endpoints.enable(id) : await client.endpoints.disable(id)))
    },
  )
}

const remove = defineCommand(
  {
    name: 'endpoints delete',
    summary: 'delete an endpoint (deliveries stop; past ones are kept)',
    usage: ['<id> [options]'],
    positionals: ['<id>'],
    description: 'Deletes the endpoint: deliveries to it stop. The service keeps its past deliveries.',
    flags: SERVICE_FLAGS,
    exitCodes: EXIT_CODES,
  },
  async ({ values, positionals }, io) => {
    const id = uuid(positionals[0], 'the endpoint id (svc-webhooks endpoints delete <id>)')
    const client = service(values, io)
    return calling(io, 'delete', async () => {
      await client.endpoints.remove(id)
      io.out(values.json ? `${JSON.stringify({ id, deleted: true })}\n` : `deleted endpoint ${id}\n`)
      return EXIT.ok
    })
  },
)

const rotate = defineCommand(
  {
    name: 'endpoints rotate',
    summary: "rotate an endpoint's signing secret; the new one is shown once",
    usage: ['<id> [--write-secret-file PATH] [options]'],
    positionals: ['<id>'],
    description: `Rotates the signing secret. The old secret stops verifying at once, with no overlap (spec
§4.1): a receiver still holding it refuses deliveries (401) until it has the new one. For rotation
without refusals, use rotateEndpointSecret with a secret source. The new secret is in this one
answer: printed once, or written to --write-secret-file PATH (mode 0600). If the answer is lost,
rotate again.`,
    flags: { ...SECRET_FILE_FLAG, ...SERVICE_FLAGS },
    examples: ['npx svc-webhooks endpoints rotate 0b6c... --write-secret-file /run/secrets/svc-webhook'],
    exitCodes: EXIT_CODES,
  },
  async ({ values, positionals }, io) => {
    const id = uuid(positionals[0], 'the endpoint id (svc-webhooks endpoints rotate <id>)')
    const file = values['write-secret-file']
    if (file !== undefined) checkWritable(file)
    const client = service(values, io)
    return calling(io, 'rotate', async () => {
      const endpoint = await client.endpoints.rotateSecret(id)
      const code = handOver(io, values.json, file, endpoint, `rotated the secret of endpoint ${endpoint.id}: the old one stopped verifying now`, '')
      if (code === EXIT.ok && !values.json) io.err('Deliveries refused before your receiver has the new secret can be resent: svc-webhooks endpoints resend --from-log FILE\n')
      return code
    })
  },
)

/** A UUID anywhere in a text, not inside a longer token of letters, digits or dashes. */
const UUID_IN_TEXT = /(?<![0-9a-z-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9a-z-])/gi
const HAS_UUID = new RegExp(UUID_IN_TEXT.source, 'i')
/** Where a line of ours begins: the first `svc-webhooks: <status> <code>` in it, whatever a logger put before. */
const OURS = /svc-webhooks: (\d{3}) ([a-z_]+)/i
/** The summary's id list starts after the last of these: an id holds no space, so none can contain it. */
const ID_LIST = /, delivery ids? /gi
/** How many unread lines are listed one by one. */
const MAX_UNREAD_SHOWN = 10
/** More ids than this from a log are resent only with --yes: a few disables' worth (the service disables an endpoint at 20 refusals in a row). */
const CONFIRM_PAST = 100

/** What {@link refusedIds} found in a log. */
export interface RefusedInLog {
  /** The distinct delivery ids of 4xx refusals, lowercase, in the order first seen. */
  ids: string[]
  /** Refusals counted in summaries past the ids they list (`(and N not listed)`). */
  unnamed: number
  /** Refusals whose id is not a UUID: no delivery of the service has one (§6.1), so none can be resent. */
  notUuid: number
  /** Summary lines that listed as many ids as a window can hold: more refusals in 10 s than the sender ever makes. */
  fullWindows: number
  /** Lines that look like refusal lines but could not be read: their number (from 1) and why. */
  unread: Array<{ line: number; why: string }>
}

/**
 * The delivery ids of the refusal lines in a log: the receiver's own lines
 * (`svc-webhooks: 401 invalid_signature (delivery <id>, ...): ...`), the summaries of collapsed
 * repeats (`...: 12 more in the last 10 s, delivery ids <id> <id> ... (and N not listed)`: each
 * distinct id, up to the cap), and JSON lines of a logged result
 * (`{"outcome":"refused","status":401,"id":"..."}`). Only 4xx refusals: the sender retries a 5xx
 * itself. Ids are taken by their UUID shape from where the line puts them, whatever else the line
 * holds (a forged id with a `.` or a `(`, a tenant name with a `:`), so nothing a request sends
 * can hide the ids after it; a line that looks like a refusal line but cannot be read is returned
 * in `unread`, never skipped.
 *
 * @example
 * refusedIds('svc-webhooks: 401 invalid_signature (delivery 0b6c...): ...').ids // ['0b6c...']
 */
export function refusedIds(text: string): RefusedInLog {
  const ids = new Set<string>()
  const found: RefusedInLog = { ids: [], unnamed: 0, notUuid: 0, fullWindows: 0, unread: [] }
  const lines = text.split(/\r?\n/)
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n]!
    const unread = (why: string) => void found.unread.push({ line: n + 1, why })
    const ours = OURS.exec(raw)
    if (ours) {
      if (!ours[1]!.startsWith('4')) continue
      const rest = raw.slice(ours.index + ours[0].length)
      if (rest.startsWith(' (delivery ')) {
        // One refusal: its id is the token right after `(delivery ` (an id holds no space).
        const after = rest.slice(' (delivery '.length)
        const token = after.split(' ', 1)[0]!
        const uuids = token.match(UUID_IN_TEXT)
        if (uuids) for (const id of uuids) ids.add(id.toLowerCase())
        else if (token.length === after.trimEnd().length) unread('a refusal line cut short in its delivery id')
        else found.notUuid++
        continue
      }
      if (/^(?:, endpoint .*)?: [\d,]+ more in /.test(rest)) {
        // A summary: the ids follow the last `, delivery id(s) `; none when the requests named none.
        let at = -1
        for (const match of rest.matchAll(ID_LIST)) at = match.index + match[0].length
        if (at < 0) continue
        let list = rest.slice(at)
        // Every UUID of the list is taken, whatever the tokens around it hold.
        const uuids = list.match(UUID_IN_TEXT) ?? []
        for (const id of uuids) ids.add(id.toLowerCase())
        const counted = /\(and ([\d,]+) not listed\)/.exec(list)
        if (counted) {
          found.unnamed += Number(counted[1]!.replace(/,/g, ''))
          found.fullWindows++
          list = list.slice(0, counted.index)
        }
        // What the list holds besides UUIDs, for the count of ids no delivery has: the list ends
        // where the receiver's hint (a sentence, no UUID) begins, a logger's JSON wrapper maybe after it.
        const end = list.lastIndexOf('. ')
        const hint = end >= 0 && /^[A-Z]/.test(list.slice(end + 2)) && !HAS_UUID.test(list.slice(end))
        if (hint) list = list.slice(0, end)
        const tokens = list.split(' ').filter((token) => token !== '' && token !== '.')
        found.notUuid += tokens.filter((token) => !HAS_UUID.test(token)).length
        const last = tokens[tokens.length - 1]
        // The line ends inside what looks like an id: cut short, by a log shipper's line limit.
        if (!counted && !hint && last !== undefined && /^[0-9a-f-]+$/i.test(last) && !UUID.test(last)) {
          found.notUuid--
          unread('a summary line cut short in its list of ids')
        }
        continue
      }
      if (rest.startsWith(': ') || rest.startsWith(', endpoint ')) continue // A refusal of a request that sent no usable id.
      unread(`a ${ours[1]} line of svc-webhooks in a form this version does not read`)
      continue
    }
    if (/svc-webhooks: other lines: [\d,]+ more in .*, delivery ids? /.test(raw)) {
      // Past 100 kinds at once the log counts every further kind together, 5xx and 4xx alike.
      unread('a summary of lines of more kinds than the log keeps apart: its ids are not all refusals, so none is taken')
      continue
    }
    if (raw.trimStart().startsWith('{')) {
      let logged: { outcome?: unknown; status?: unknown; id?: unknown }
      try {
        logged = JSON.parse(raw) as typeof logged
      } catch {
        if (raw.includes('"refused"')) unread('a JSON line that does not parse (cut short?)')
        continue
      }
      if (logged?.outcome !== 'refused' || typeof logged.status !== 'number' || logged.status < 400 || logged.status >= 500) continue
      if (typeof logged.id !== 'string') continue
      if (UUID.test(logged.id)) ids.add(logged.id.toLowerCase())
      else found.notUuid++
    }
  }
  found.ids = [...ids]
  return found
}

const resend = defineCommand(
  {
    name: 'endpoints resend',
    summary: 'resend deliveries by id, or every refused delivery named in a log',
    usage: ['<id>... [options]', '--from-log FILE [options]'],
    positionals: ['<id>...'],
    description: `Asks the service to send deliveries again: the stored bytes, under the same id, with a fresh
timestamp and signatures. A receiver that deduplicates by id processes each at most once.
--from-log collects the ids of the 4xx refusal lines svc-webhooks wrote (and of JSON lines of a
logged onResult with outcome "refused"), by their UUID shape wherever the line puts them; a
summary line of collapsed repeats names each distinct id up to 250 per 10 s, and says how many it
could not list (log each refusal through onResult to keep them all). A line that looks like a
refusal line but cannot be read is reported on stderr. Resend once the cause (a wrong secret, an
unknown tenant) is fixed.

A refused request's id is whatever it sent: anyone who can reach the receiver can fill its log
with made-up ids, or with real ids of deliveries older than the receiver's dedupe retention (72 h
by default), which run again when resent. So --from-log resends without --yes only when the log
names at most ${CONFIRM_PAST} ids, no summary hit its cap of 250 (more refusals in 10 s than the
sender makes: the service disables an endpoint after 20 in a row), and the log was written in
the last 72 h. Otherwise it resends nothing and says why: check the ids with --dry-run, cut the
log to the incident, or pass --yes.`,
    flags: {
      'from-log': { type: 'string', value: 'FILE', help: 'resend the delivery ids of the refusal lines in FILE' },
      'dry-run': { type: 'boolean', help: 'print the ids that would be resent, and resend none' },
      yes: { type: 'boolean', help: `resend every id --from-log found, even past ${CONFIRM_PAST} ids, a full summary\nor a log older than 72 h` },
      ...SERVICE_FLAGS,
    },
    examples: ['npx svc-webhooks endpoints resend --from-log receiver.log', 'npx svc-webhooks endpoints resend 7d3e... 91af...'],
    exitCodes: '0 every delivery was accepted for resending, 1 one or more were not (or the log named none), 2 usage error, or --from-log needs --yes.',
  },
  async ({ values, positionals }, io) => {
    const given = positionals.map((p) => uuid(p, 'a delivery id'))
    const file = values['from-log']
    let found: RefusedInLog | undefined
    if (file !== undefined) found = refusedIds(readText(file, '--from-log'))
    else if (given.length === 0) {
      throw new UsageError('no delivery ids: give them (svc-webhooks endpoints resend <id>...) or --from-log FILE.')
    }
    const ids = [...new Set([...given.map((id) => id.toLowerCase()), ...(found?.ids ?? [])])]
    if (found) {
      for (const { line, why } of found.unread.slice(0, MAX_UNREAD_SHOWN)) io.err(`warning: ${file}:${line} not read: ${why}.\n`)
      if (found.unread.length > MAX_UNREAD_SHOWN) io.err(`warning: ${found.unread.length - MAX_UNREAD_SHOWN} more lines not read.\n`)
      if (found.unnamed > 0) {
        io.err(`warning: ${found.unnamed} more refusals were counted in summary lines past the ids they list; they cannot be resent from this log (log each refusal through onResult to keep every id).\n`)
      }
      if (found.notUuid > 0) io.err(`note: ${found.notUuid} refusals named an id that is not a UUID: no delivery of the service has one, so they were not resent.\n`)
    }
    if (ids.length === 0) {
      io.err(`svc-webhooks endpoints resend: no refused deliveries named in ${file}.\n`)
      return EXIT.failed
    }
    if (values['dry-run']) {
      io.out(values.json ? `${JSON.stringify(ids)}\n` : `${ids.join('\n')}\n`)
      return EXIT.ok
    }
    if (found && file !== undefined && !values.yes) {
      const why: string[] = []
      if (found.ids.length > CONFIRM_PAST) why.push(`it names ${found.ids.length} ids (more than ${CONFIRM_PAST})`)
      if (found.fullWindows > 0) {
        why.push(`${found.fullWindows} summary line${found.fullWindows === 1 ? '' : 's'} hit the cap of 250 ids per 10 s: a flood of requests, not the sender, which stops at 20 refusals in a row`)
      }
      const age = Date.now() - statSync(file).mtimeMs
      if (age > DEFAULT_RETENTION_MS) why.push(`it was last written ${Math.floor(age / 3_600_000)} h ago, past the receiver's dedupe retention (72 h by default)`)
      if (why.length > 0) {
        io.err(
          `svc-webhooks endpoints resend: nothing resent: ${why.join('; ')}. A refused request's id is whatever it sent, so this log may name ` +
            'made-up ids, or real ids of deliveries older than the dedupe retention, which run again when resent. ' +
            `See them with --dry-run, cut the log to the incident, or pass --yes to resend all ${ids.length}.\n`,
        )
        return EXIT.usage
      }
    }
    const client = service(values, io)
    const results: Array<{ id: string; ok: boolean; status?: number; code?: string; answer?: Record<string, string>; error?: string }> = []
    for (const id of ids) {
      try {
        const answer = await client.deliveries.resend(id)
        results.push({ id, ok: true, answer })
        if (!values.json) io.out(`resent ${id}${Object.keys(answer).length > 0 ? `: ${Object.entries(answer).map(([k, v]) => `${k} ${v}`).join(', ')}` : ''}\n`)
      } catch (error) {
        if (!isServiceApiError(error)) throw error
        results.push({ id, ok: false, status: error.status, code: error.code, error: error.detail })
        if (!values.json) io.out(`FAILED ${id}: ${error.status || 'no answer'} ${error.code}: ${error.detail}\n`)
        // Every other call would be refused the same way.
        if (error.status === 401 || error.status === 403) {
          io.err(`svc-webhooks endpoints resend: ${error.message.replace(/^svc-webhooks: /, '')}\n`)
          break
        }
      }
    }
    const failed = results.filter((r) => !r.ok).length
    const untried = ids.length - results.length
    if (values.json) io.out(`${JSON.stringify(results, null, 2)}\n`)
    else io.out(`${results.length - failed} resent, ${failed} failed${untried > 0 ? `, ${untried} not tried` : ''}\n`)
    return failed + untried === 0 ? EXIT.ok : EXIT.failed
  },
)

const status = defineCommand(
  {
    name: 'endpoints status',
    summary: "an endpoint's state at the service: enabled, failure streak, last error",
    usage: ['<id> [options]'],
    positionals: ['<id>'],
    description: `Shows the endpoint as the service sees it: enabled, consecutive_failures (it is disabled at 20),
last_error and last_delivery_at. A disabled endpoint receives nothing and does not recover on its
own: fix the receiver, then svc-webhooks endpoints enable <id>.`,
    flags: SERVICE_FLAGS,
    examples: ['npx svc-webhooks endpoints status 0b6c...'],
    exitCodes: '0 enabled, 1 disabled, not found or the service refused the call, 2 usage error.',
  },
  async ({ values, positionals }, io) => {
    const id = uuid(positionals[0], 'the endpoint id (svc-webhooks endpoints status <id>)')
    const client = service(values, io)
    return calling(io, 'status', async () => {
      // §4.1 has no read of one endpoint: the list has them all.
      const endpoint = (await client.endpoints.list()).find((e) => e.id === id)
      if (endpoint === undefined) {
        io.err(`svc-webhooks endpoints status: no endpoint ${id} in this business (svc-webhooks endpoints list).\n`)
        return EXIT.failed
      }
      if (values.json) io.out(`${JSON.stringify(withoutSecret(endpoint), null, 2)}\n`)
      else {
        io.out(`${describe(endpoint)}\n`)
        if (!endpoint.enabled) io.out(`disabled${endpoint.last_error ? ` (${endpoint.last_error})` : ''}: it receives nothing until enabled. Fix the receiver, then: svc-webhooks endpoints enable ${endpoint.id}\n`)
      }
      return endpoint.enabled ? EXIT.ok : EXIT.failed
    })
  },
)

const ACTIONS: readonly Command[] = [list, create, update, toggle(true), toggle(false), remove, rotate, resend, status]
const actionName = (c: Command) => c.name.slice('endpoints '.length)

const HELP = `Usage: svc-webhooks endpoints <action> [options]

Manages your webhook endpoints through the service's API.

Actions:
${ACTIONS.map((c) => `  ${actionName(c).padEnd(9)}${c.summary}`).join('\n')}

Run "svc-webhooks endpoints <action> --help" for its options.

Service: $SVC_API_URL (or --api-url), $SVC_API_TOKEN, $SVC_BUSINESS_ID (or --business-id).
${TOKEN_NOTE}

Exit codes: ${EXIT_CODES}`

/** `svc-webhooks endpoints`: dispatches to its actions, each a command of its own. */
export const endpoints: Command = actionGroup(
  {
    name: 'endpoints',
    summary: 'list, create, rotate, enable, resend ... your webhook endpoints at the service',
    usage: ['<action> [options]'],
    positionals: ['<action>'],
    description: "Manages your webhook endpoints through the service's API.",
    flags: {},
    exitCodes: EXIT_CODES,
    help: HELP,
  },
  ACTIONS,
)
