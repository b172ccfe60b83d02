/**
 * In-memory stand-ins for the two things the lifecycle functions talk to, so their steps can be
 * tested one by one: a service client (spec/service-api.md §4.1, the client itself is tested
 * against the emulator elsewhere) whose calls can be made to fail in each way the real one does,
 * and a secret source that records every write. Both append to one `steps` list, so the order of
 * writes and calls is what a test asserts.
 */
import type { CreateEndpointInput, ServiceClient, WebhookEndpoint } from 'svc-webhooks/service'
import type { SecretSource, SecretState } from 'svc-webhooks/service'

/** A failure a call can be made to have, as the real client reports it. */
export type Fault =
  /** The service refused (a 4xx): nothing happened there. */
  | { status: number; code?: string; when?: 'before' }
  /** No answer (a 5xx after retries, a timeout): `when: 'after'` means the service did act, and the answer was lost. */
  | { status?: number; code?: string; when: 'before' | 'after'; lost: true }

export class ServiceApiErrorLike extends Error {
  override name = 'ServiceApiError'
  constructor(
    readonly status: number | undefined,
    readonly code: string,
  ) {
    // As a careless client might: the token in the message. Nothing may copy a message into a line.
    super(`request failed (Authorization: Bearer svc_pat_TOKEN_MUST_NOT_LEAK) ${status ?? 'network'} ${code}`)
  }
}

export interface FakeService {
  service: ServiceClient
  steps: string[]
  endpoints: Map<string, WebhookEndpoint & { secret: string }>
  /** Every secret the fake ever made: none may appear in a log line, an error or a return value. */
  secretsMade: string[]
  /** Faults for the next calls of an operation, taken one per call. */
  faults: Partial<Record<'rotateSecret' | 'create' | 'list' | 'enable', Fault[]>>
  /** Called inside rotateSecret and create, before they act: lets a test look at the source then. */
  onCall?: (operation: string) => void | Promise<void>
  /** Values `consecutive_failures`/`enabled` take on successive list calls (then the last stays). */
  script: Array<Partial<WebhookEndpoint>>
  calls: Record<string, number>
}

let made = 0

export function fakeService(initial: Partial<WebhookEndpoint> = {}): FakeService {
  const fake: FakeService = {
    steps: [],
    endpoints: new Map(),
    secretsMade: [],
    faults: {},
    script: [],
    calls: {},
    service: undefined as unknown as ServiceClient,
  }
  const newSecret = (): string => {
    const secret = `svc_whsec_fake_${++made}_${Math.random().toString(36).slice(2)}`
    fake.secretsMade.push(secret)
    return secret
  }
  const add = (input: CreateEndpointInput, extra: Partial<WebhookEndpoint> = {}) => {
    const endpoint = {
      id: `00000000-0000-4000-8000-${String(fake.endpoints.size + 1).padStart(12, '0')}`,
      label: input.label,
      url: input.url,
      subscribed_events: input.subscribed_events,
      enabled: true,
      consecutive_failures: 0,
      last_error: null,
      last_delivery_at: null,
      created: new Date().toISOString(),
      ...extra,
      secret: newSecret(),
    }
    fake.endpoints.set(endpoint.id, endpoint)
    return endpoint
  }
  const show = ({ secret: _, ...endpoint }: WebhookEndpoint & { secret: string }): WebhookEndpoint => ({ ...endpoint })
  /** Runs `act` under the next fault of `operation`, if any. */
  async function call<T>(operation: keyof FakeService['faults'], act: () => T): Promise<T> {
    fake.calls[operation] = (fake.calls[operation] ?? 0) + 1
    fake.steps.push(operation)
    await fake.onCall?.(operation)
    const fault = fake.faults[operation]?.shift()
    if (fault && fault.when !== 'after') throw new ServiceApiErrorLike(fault.status, fault.code ?? 'fault')
    const result = act()
    if (fault) throw new ServiceApiErrorLike(fault.status, fault.code ?? 'outcome_unknown')
    return result
  }
  const get = (id: string) => {
    const endpoint = fake.endpoints.get(id)
    if (!endpoint) throw new ServiceApiErrorLike(404, 'not_found')
    return endpoint
  }
  fake.service = {
    endpoints: {
      list: () =>
        call('list', () => {
          const next = fake.script.length > 1 ? fake.script.shift() : fake.script[0]
          for (const endpoint of fake.endpoints.values()) Object.assign(endpoint, next)
          return [...fake.endpoints.values()].map(show)
        }),
      create: (input) => call('create', () => {
        const endpoint = add(input)
        return { ...show(endpoint), signing_secret: endpoint.secret }
      }),
      update: async (id, input) => show(Object.assign(get(id), input)),
      remove: async (id) => void fake.endpoints.delete(id),
      rotateSecret: (id) =>
        call('rotateSecret', () => {
          const endpoint = get(id)
          endpoint.secret = newSecret()
          return { ...show(endpoint), signing_secret: endpoint.secret }
        }),
      enable: (id) => call('enable', () => show(Object.assign(get(id), { enabled: true, consecutive_failures: 0 }))),
      disable: async (id) => show(Object.assign(get(id), { enabled: false })),
    },
    deliveries: { resend: async () => ({ status: 'queued' }) },
  }
  if (initial.url !== undefined || Object.keys(initial).length > 0) {
    add({ label: 'fake', url: 'https://example.com/webhooks', subscribed_events: [] }, initial)
  }
  return fake
}

/**
 * A secret source in memory that logs each write (with the secrets named by their index in
 * `names`), and writes conditionally as the real ones do: a version bumped by each write, and
 * `write(state, { version })` refused (false) when another write came first. `unconditional`
 * makes it a source written for an earlier version (write answers nothing, checks nothing).
 */
export class MemorySource implements SecretSource {
  failWrites = 0
  failReads = false
  version = 0
  unconditional = false
  /** Called inside each write, before it lands: lets a test slip another writer in between. */
  beforeWrite?: (state: SecretState) => void | Promise<void>
  constructor(
    public state: SecretState | undefined,
    private readonly steps: string[] = [],
    private readonly name: (secret: string) => string = (s) => s,
  ) {}
  read(): SecretState {
    if (this.failReads) throw Object.assign(new Error('source down'), { name: 'SourceDown' })
    if (!this.state) throw Object.assign(new Error('nothing stored'), { missing: true })
    return { ...this.state, secrets: [...this.state.secrets], ...(this.state.pending ? { pending: this.state.pending.map((m) => ({ ...m })) } : {}), version: this.version }
  }
  async write(state: SecretState, condition?: { version: number }): Promise<boolean | void> {
    if (this.failWrites > 0) {
      this.failWrites--
      throw Object.assign(new Error('source down'), { name: 'SourceDown' })
    }
    await this.beforeWrite?.(state)
    if (!this.unconditional && condition !== undefined && condition.version !== this.version) return false
    this.version++
    const { version: _, ...stored } = state
    this.state = { ...stored, secrets: [...state.secrets] }
    const pending = (state.pending?.length ?? 0) > 0 || state.pendingUntil !== undefined
    this.steps.push(`write [${state.secrets.map(this.name).join(', ')}]${pending ? ' pending' : ''}`)
    return this.unconditional ? undefined : true
  }
}

/** Waits until `check` passes (it throws until then), polling every 5 ms, at most `timeoutMs`. */
export async function until(check: () => unknown, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      if ((await check()) !== false) return
    } catch (error) {
      if (Date.now() > deadline) throw error
    }
    if (Date.now() > deadline) throw new Error('until: the condition never held')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
