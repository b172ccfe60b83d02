/**
 * `svc-webhooks history list | show ID | replay ID`: reads the history the receiver and the worker
 * keep (RedisHistory or PostgresHistory: MemoryHistory lives in its process), and replays a kept
 * delivery through the handlers of a module you name. The engine comes from `--config FILE` (a
 * module exporting `history`, and `on` for replay) or from `--redis URL` / `--postgres URL`
 * (their default prefix and table). Bodies are printed only with `--body`.
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { actionGroup, defineCommand, EXIT, integer, UsageError, type Command, type Io } from './command.js'
import type { HistoryEntry, HistoryOutcome, WebhookHistory } from '../history/types.js'
import { HISTORY_OUTCOMES } from '../history/types.js'
import { printable } from '../log-window.js'

const ENGINE_FLAGS = {
  config: { type: 'string', value: 'FILE', help: 'a module exporting `history` (and `on`, the handlers, for replay)', section: 'Engine' },
  redis: { type: 'string', value: 'URL', help: 'RedisHistory on this server (default prefix), or $SVC_HISTORY_REDIS_URL', section: 'Engine' },
  postgres: { type: 'string', value: 'URL', help: 'PostgresHistory in this database (default table), or $SVC_HISTORY_POSTGRES_URL', section: 'Engine' },
  prefix: { type: 'string', value: 'PREFIX', help: 'with --redis: the key prefix', section: 'Engine' },
  table: { type: 'string', value: 'TABLE', help: 'with --postgres: the table', section: 'Engine' },
} as const

interface Opened {
  history: WebhookHistory
  on?: Record<string, unknown>
  close: () => Promise<void>
}

type EngineValues = { config?: string; redis?: string; postgres?: string; prefix?: string; table?: string }

async function load(specifier: string, what: string): Promise<Record<string, unknown>> {
  try {
    return (await import(specifier)) as Record<string, unknown>
  } catch (error) {
    throw new UsageError(`${what} could not be loaded (${(error as Error)?.name ?? 'Error'}: ${printable((error as Error)?.message ?? '', 200)}).`)
  }
}

async function open(values: EngineValues, io: Io): Promise<Opened> {
  if (values.config) {
    const mod = await load(pathToFileURL(resolve(values.config)).href, `--config ${values.config}`)
    const exported = (mod.default && typeof mod.default === 'object' ? mod.default : mod) as Record<string, unknown>
    const history = exported.history as WebhookHistory | undefined
    if (typeof history?.list !== 'function') throw new UsageError(`--config ${values.config} exports no \`history\` (a RedisHistory or PostgresHistory).`)
    return { history, ...(exported.on && typeof exported.on === 'object' ? { on: exported.on as Record<string, unknown> } : {}), close: async () => history.close() }
  }
  const redisUrl = values.redis ?? io.env.SVC_HISTORY_REDIS_URL
  const postgresUrl = values.postgres ?? io.env.SVC_HISTORY_POSTGRES_URL
  if (redisUrl) {
    const { default: Redis } = (await load('ioredis', 'ioredis (npm install ioredis)')) as { default: new (url: string, o: object) => { disconnect(): void; on(e: string, f: () => void): void } }
    const { RedisHistory } = await import('../history/redis.js')
    const client = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: false })
    client.on('error', () => undefined)
    const history = new RedisHistory({ client: client as never, log: false, ...(values.prefix ? { prefix: values.prefix } : {}) })
    return { history, close: async () => client.disconnect() }
  }
  if (postgresUrl) {
    const pg = (await load('pg', 'pg (npm install pg)')) as { default?: { Pool: new (o: object) => { end(): Promise<void>; on(e: string, f: () => void): void } } }
    const { PostgresHistory } = await import('../history/postgres.js')
    const pool = new pg.default!.Pool({ connectionString: postgresUrl, max: 2 })
    pool.on('error', () => undefined)
    const history = new PostgresHistory({ pool: pool as never, log: false, ...(values.table ? { table: values.table } : {}) })
    return { history, close: () => pool.end() }
  }
  throw new UsageError('which history? --config FILE, --redis URL or --postgres URL (or $SVC_HISTORY_REDIS_URL, $SVC_HISTORY_POSTGRES_URL).')
}

async function using(values: EngineValues, io: Io, run: (opened: Opened) => Promise<number>): Promise<number> {
  const opened = await open(values, io)
  try {
    return await run(opened)
  } catch (error) {
    if (error instanceof UsageError) throw error
    io.err(`svc-webhooks history: the history did not answer (${printable((error as Error)?.name ?? 'Error', 60)}: ${printable((error as Error)?.message ?? '', 200)}).\n`)
    return EXIT.failed
  } finally {
    await opened.close().catch(() => undefined)
  }
}

function time(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value)
  if (!Number.isFinite(ms)) throw new UsageError(`${flag} must be a time (ISO 8601, or milliseconds since the epoch).`)
  return ms
}

const iso = (ms: number | undefined) => (ms === undefined ? '-' : new Date(ms).toISOString())

function line(e: HistoryEntry): string {
  return [iso(e.receivedAt), e.outcome.padEnd(10), String(e.status ?? '-').padEnd(3), printable(e.endpoint, 24).padEnd(16), printable(e.id, 80), e.errorName ? `${printable(e.errorName, 40)}: ${printable(e.errorMessage ?? '', 120)}` : ''].join('  ').trimEnd()
}

const list = defineCommand(
  {
    name: 'history list',
    summary: 'the latest deliveries, newest first, filtered by endpoint, outcome and time',
    usage: ['[--outcome OUTCOME] [--endpoint NAME] [--since TIME] [--until TIME] [--limit N] [--cursor C] [--json] <engine>'],
    description: 'Lists the history, newest first: time received, outcome, last status, endpoint, delivery id, and the last error. The next page: --cursor with the value printed last.',
    flags: {
      outcome: { type: 'string', value: 'OUTCOME', help: HISTORY_OUTCOMES.join(', ') },
      endpoint: { type: 'string', value: 'NAME', help: 'one endpoint' },
      since: { type: 'string', value: 'TIME', help: 'received at or after (ISO 8601 or ms)' },
      until: { type: 'string', value: 'TIME', help: 'received before' },
      limit: { type: 'string', value: 'N', help: 'entries (default 50, at most 500)' },
      cursor: { type: 'string', value: 'C', help: 'the next page, as printed by the previous one' },
      json: { type: 'boolean', help: 'JSON instead of lines' },
      ...ENGINE_FLAGS,
    },
    examples: ['svc-webhooks history list --redis redis://127.0.0.1:6379 --outcome failed --since 2026-11-27T14:00Z --until 2026-11-27T14:20Z'],
    exitCodes: '0 listed; 1 the history did not answer; 2 usage error.',
  },
  async ({ values }, io) => {
    if (values.outcome !== undefined && !HISTORY_OUTCOMES.includes(values.outcome as HistoryOutcome)) throw new UsageError(`--outcome must be one of ${HISTORY_OUTCOMES.join(', ')}.`)
    const since = time(values.since, '--since')
    const until = time(values.until, '--until')
    const limit = integer(values.limit, '--limit', 50)
    return using(values, io, async ({ history }) => {
      const page = await history.list({ limit, ...(values.outcome && { outcome: values.outcome as HistoryOutcome }), ...(values.endpoint && { endpoint: values.endpoint }), ...(since !== undefined && { since }), ...(until !== undefined && { until }), ...(values.cursor && { cursor: values.cursor }) })
      if (values.json) io.out(`${JSON.stringify(page, null, 2)}\n`)
      else {
        for (const e of page.entries) io.out(`${line(e)}\n`)
        if (page.entries.length === 0) io.out('no deliveries\n')
        if (page.cursor) io.out(`more: --cursor ${page.cursor}\n`)
      }
      return EXIT.ok
    })
  },
)

const show = defineCommand(
  {
    name: 'history show',
    summary: 'one delivery: outcome, times, attempts, replays, the last error',
    usage: ['<id> [--endpoint NAME] [--body] [--json] <engine>'],
    positionals: ['<id>'],
    description: 'Shows one delivery of the history. Its body (when kept) only with --body.',
    flags: { endpoint: { type: 'string', value: 'NAME', help: 'its endpoint (default: the latest entry of that id)' }, body: { type: 'boolean', help: 'print the kept body too' }, json: { type: 'boolean', help: 'JSON' }, ...ENGINE_FLAGS },
    exitCodes: '0 shown; 1 not in the history, or the history did not answer; 2 usage error.',
  },
  async ({ values, positionals }, io) => {
    const id = positionals[0]
    if (!id) throw new UsageError('the delivery id is required (svc-webhooks history show <id>).')
    return using(values, io, async ({ history }) => {
      const entry = await history.get(id, values.endpoint)
      if (!entry) {
        io.err(`svc-webhooks history show: no delivery ${printable(id, 80)} in the history.\n`)
        return EXIT.failed
      }
      if (!values.body) delete entry.body
      if (values.json) io.out(`${JSON.stringify(entry, null, 2)}\n`)
      else {
        const rows: [string, unknown][] = [
          ['id', printable(entry.id, 256)], ['endpoint', printable(entry.endpoint, 128)], ['event type', entry.eventType ?? '-'], ['outcome', entry.outcome],
          ['last answer', `${entry.status ?? '-'}${entry.code ? ` ${entry.code}` : ''}`], ['received', iso(entry.receivedAt)], ['processed', iso(entry.processedAt)],
          ['attempts', entry.attempts], ['deliveries', entry.deliveries], ['replays', `${entry.replays}${entry.replayedAt ? ` (last ${iso(entry.replayedAt)})` : ''}`],
          ['error', entry.errorName ? `${printable(entry.errorName, 60)}: ${printable(entry.errorMessage ?? '', 300)}` : '-'], ['body', entry.hasBody ? (values.body ? '' : 'kept (--body to print it)') : 'not kept'],
        ]
        for (const [k, v] of rows) io.out(`${k.padEnd(12)}${String(v)}\n`)
        if (values.body && entry.body !== undefined) io.out(`${entry.body}\n`)
      }
      return EXIT.ok
    })
  },
)

const replay = defineCommand(
  {
    name: 'history replay',
    summary: 'runs a kept delivery through your handlers again (not through the dedupe record)',
    usage: ['<id> --config FILE [--endpoint NAME]'],
    positionals: ['<id>'],
    description:
      'Runs a delivery whose body the history kept (keepBodies) through the handler for its type, on purpose: the dedupe record is not consulted, ' +
      'and the entry counts the replay and its outcome. --config names a module exporting `history` and `on` (your handlers). ' +
      'A delivery whose body was not kept cannot be replayed here: ask the service to resend it (svc-webhooks endpoints resend <endpoint-id> <delivery-id>).',
    flags: { endpoint: { type: 'string', value: 'NAME', help: 'its endpoint (default: the latest entry of that id)' }, ...ENGINE_FLAGS },
    exitCodes: '0 the handler succeeded; 1 it failed, the body was not kept, or the history did not answer; 2 usage error.',
  },
  async ({ values, positionals }, io) => {
    const id = positionals[0]
    if (!id) throw new UsageError('the delivery id is required (svc-webhooks history replay <id>).')
    return using(values, io, async ({ history, on }) => {
      if (!on) throw new UsageError('replay needs your handlers: --config FILE exporting `history` and `on`.')
      try {
        const result = await history.replay({ handlers: on as never, now: Date.now }, id, values.endpoint)
        io.out(`${result.outcome}: ${printable(id, 80)} ran through its handler again in ${result.durationMs} ms${result.error ? ` (${printable((result.error as Error)?.name ?? 'Error', 60)})` : ''}\n`)
        return result.outcome === 'processed' ? EXIT.ok : EXIT.failed
      } catch (error) {
        if ((error as { name?: unknown }).name !== 'ReplayError') throw error
        io.err(`svc-webhooks history replay: ${(error as Error).message}\n`)
        return EXIT.failed
      }
    })
  },
)

const ACTIONS: readonly Command[] = [list, show, replay]
const actionName = (c: Command) => c.name.slice('history '.length)

const HELP = `Usage: svc-webhooks history <action> [options]

Reads the delivery history the receiver and the worker keep, and replays a kept delivery.

Actions:
${ACTIONS.map((c) => `  ${actionName(c).padEnd(8)}${c.summary}`).join('\n')}

Run "svc-webhooks history <action> --help" for its options.
Engine: --config FILE (exports \`history\`, and \`on\` for replay), --redis URL or --postgres URL.

Exit codes: 0 done; 1 not found, failed, or the history did not answer; 2 usage error.`

/** `svc-webhooks history`: dispatches to list, show and replay. */
export const history: Command = actionGroup(
  {
    name: 'history',
    summary: 'list, show and replay the deliveries the history kept',
    usage: ['<action> [options]'],
    positionals: ['<action>'],
    description: 'Reads the delivery history and replays a kept delivery.',
    flags: {},
    exitCodes: '0 done; 1 failed; 2 usage error.',
    help: HELP,
  },
  ACTIONS,
)
