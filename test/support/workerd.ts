/**
 * Running test Workers inside real workerd: bundle a worker module from the built package with
 * esbuild under the Workers export conditions (so `#crypto` is WebCrypto), then serve it with
 * Miniflare on 127.0.0.1, capturing the runtime's console output.
 */
import { resolve } from 'node:path'
import type { Readable } from 'node:stream'
import { build, type Plugin } from 'esbuild'
import { Miniflare, type MiniflareOptions } from 'miniflare'

/** The compatibility date the test Workers run under: the newest the bundled workerd supports. */
export const COMPATIBILITY_DATE = '2026-04-26'

const root = resolve(import.meta.dirname, '../..')

// Examples carry their own package.json (users install `svc-webhooks` from npm there): resolve the
// package from the repository root, where its self-reference points at the built dist/.
const packageFromRoot: Plugin = {
  name: 'svc-webhooks-from-root',
  setup(b) {
    b.onResolve({ filter: /^svc-webhooks(\/|$)/ }, (args) =>
      args.pluginData === root ? undefined : b.resolve(args.path, { kind: args.kind, resolveDir: root, pluginData: root }),
    )
  },
}

/**
 * Bundles `entry` (resolving `svc-webhooks/*` through the package's self-reference to dist/) the
 * way wrangler does for a Worker. Throws if the bundle would import `node:crypto`.
 *
 * @example
 * const script = await bundleWorker('test/adapters/cloudflare.worker.ts')
 */
export async function bundleWorker(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [resolve(root, entry)],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    // The repository's tsconfig maps `svc-webhooks/*` to src/ and `#crypto` to node:crypto for
    // the type checker; the bundle must see what users install instead.
    tsconfigRaw: {},
    plugins: [packageFromRoot],
    logLevel: 'error',
  })
  const script = result.outputFiles[0]!.text
  if (/["']node:crypto["']/.test(script)) throw new Error(`${entry}: the Worker bundle imports node:crypto`)
  return script
}

/** A running Miniflare instance serving one Worker. */
export interface WorkerdServer {
  url: string
  mf: Miniflare
  /** Everything the Worker wrote to its console so far (stdout and stderr). */
  logs(): string
  dispose(): Promise<void>
}

/**
 * Starts Miniflare on 127.0.0.1 with a random port; gives up after `timeoutMs`.
 *
 * @example
 * const server = await startWorkerd({ script, bindings: { SVC_WEBHOOK_SECRET: CASE_SECRET } })
 */
export async function startWorkerd(
  options: { script: string } & Partial<Pick<MiniflareOptions, 'bindings' | 'durableObjects' | 'queueProducers' | 'queueConsumers'>>,
  timeoutMs = 60_000,
): Promise<WorkerdServer> {
  let output = ''
  const mf = new Miniflare({
    modules: true,
    script: options.script,
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: options.bindings ?? {},
    durableObjects: options.durableObjects ?? {},
    ...(options.queueProducers ? { queueProducers: options.queueProducers } : {}),
    ...(options.queueConsumers ? { queueConsumers: options.queueConsumers } : {}),
    host: '127.0.0.1',
    port: 0,
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    },
  } as MiniflareOptions)
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    const ready = await Promise.race([
      mf.ready,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Miniflare did not start within ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
    const url = ready.origin
    return { url, mf, logs: () => output, dispose: () => mf.dispose() }
  } catch (error) {
    await mf.dispose().catch(() => undefined)
    throw error
  } finally {
    clearTimeout(timer)
  }
}
