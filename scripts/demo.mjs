#!/usr/bin/env node
// `npm run demo`: says what it is doing at once, builds the package only when dist/ is older
// than the sources (tsup takes 20 to 60 s, long enough to look hung), then runs examples/demo.mjs.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

const root = join(import.meta.dirname, '..')

/** Newest modification time under `dir` (bounded: the source folders only). */
function newest(dir) {
  let time = 0
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) time = Math.max(time, statSync(join(entry.parentPath ?? entry.path, entry.name)).mtimeMs)
  }
  return time
}

const built = existsSync(join(root, 'dist/index.js')) ? statSync(join(root, 'dist/index.js')).mtimeMs : 0
const sources = Math.max(newest('src'), newest('adapters'), statSync(join(root, 'tsup.config.ts')).mtimeMs)
if (built < sources) {
  console.log('svc-webhooks demo: building the package first (tsup, 20 to 60 s the first time)...')
  const build = spawnSync(process.execPath, [join(root, 'node_modules/tsup/dist/cli-default.js'), '--silent'], { cwd: root, stdio: 'inherit' })
  if (build.status !== 0) process.exit(build.status ?? 1)
} else {
  console.log('svc-webhooks demo: the package is built (dist/ is newer than the sources)')
}
const demo = spawnSync(process.execPath, [join(root, 'examples/demo.mjs')], { cwd: root, stdio: 'inherit' })
process.exit(demo.status ?? 1)
