/**
 * `npm run lint:package`'s types check: packs the dist/ already built (`--ignore-scripts`, so the
 * pack does not build a second time: `npm test` built it) and runs @arethetypeswrong/cli on the
 * tarball with its default profile (every resolution mode, node10 included: the subpaths resolve
 * there through package.json "typesVersions"), then removes it. `npm pack` on its own still builds once, through `prepack`.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'

if (!existsSync('dist/index.js')) {
  console.error('lint:package: dist/ is missing; run npm run build first')
  process.exit(1)
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const tarball = execFileSync(npm, ['pack', '--ignore-scripts', '--silent'], { encoding: 'utf8' }).trim().split('\n').pop()
try {
  execFileSync(process.execPath, ['node_modules/@arethetypeswrong/cli/dist/index.js', tarball, '--format', 'table-flipped'], { stdio: 'inherit' })
} finally {
  rmSync(tarball, { force: true })
}
