/**
 * What the docs suites share to run a page's code as a reader would: the packed tarball unpacked
 * into a work directory's node_modules (beside links to this repository's frameworks), a child
 * `node` whose output is captured, a wait for it to listen, and tsc with the options `tsc --init` writes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'

/**
 * Packs the repository at `root` (dist/ as built; `prepack` is skipped so it is not built twice)
 * into `work`, unpacks it as `work/node_modules/svc-webhooks` and links each of `linked` from
 * `root`'s node_modules. Returns the unpacked package's directory.
 */
export function installPacked(root: string, work: string, linked: readonly string[]): string {
  const packed = spawnSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', work], { cwd: root, encoding: 'utf8' })
  if (packed.status !== 0) throw new Error(`npm pack failed:\n${packed.stderr}`)
  const tarball = join(work, packed.stdout.trim().split('\n').pop()!)
  for (const scope of new Set(linked.filter((name) => name.startsWith('@')).map((name) => name.split('/')[0]!))) {
    mkdirSync(join(work, 'node_modules', scope), { recursive: true })
  }
  const untar = spawnSync('tar', ['-xzf', tarball, '-C', join(work, 'node_modules')], { encoding: 'utf8' })
  if (untar.status !== 0) throw new Error(`tar failed:\n${untar.stderr}`)
  const installed = join(work, 'node_modules/svc-webhooks')
  spawnSync('mv', [join(work, 'node_modules/package'), installed])
  for (const name of linked) symlinkSync(join(root, 'node_modules', name), join(work, 'node_modules', name), 'dir')
  return installed
}

/** Runs `node file` in `dir`, adding the child to `children` (for the suite to kill); its output is captured, never printed. */
export function startNode(children: ChildProcess[], dir: string, file: string, environment: Record<string, string | undefined>, args: string[] = []) {
  const child = spawn(process.execPath, [file, ...args], { cwd: dir, env: environment as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  return { child, output: () => output, exited }
}

/** Resolves once something accepts connections on `port`; rejects if `exited` comes first (bounded: `tries` tries, 100 ms apart). */
export async function accepting(port: number, exited: Promise<number | null>, output: () => string, tries: number): Promise<void> {
  let gone = false
  void exited.then(() => (gone = true))
  for (let i = 0; i < tries; i++) {
    if (gone) throw new Error(`exited before listening on ${port}:\n${output()}`)
    const open = await new Promise<boolean>((done) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end()
        done(true)
      })
      socket.once('error', () => done(false))
    })
    if (open) return
    await new Promise((done) => setTimeout(done, 100))
  }
  throw new Error(`nothing listened on ${port}:\n${output()}`)
}

/**
 * Type-checks `files` (relative to `dir`) with `root`'s TypeScript and the options `tsc --init`
 * (TypeScript 5.9) writes, with "types": ["node"] as its comment suggests for Node.js, plus `extra`.
 * Returns tsc's output (stdout and stderr), its stdout alone, and its exit status.
 */
export function typecheck(root: string, dir: string, files: string[], extra: Record<string, unknown> = {}): { output: string; stdout: string; status: number | null } {
  const compilerOptions = {
    module: 'nodenext',
    target: 'esnext',
    types: ['node'],
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    strict: true,
    verbatimModuleSyntax: true,
    isolatedModules: true,
    ...extra,
    moduleDetection: 'force',
    skipLibCheck: true,
    noEmit: true,
  }
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }))
  const out = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8' })
  return { output: out.stdout + out.stderr, stdout: out.stdout, status: out.status }
}
