/**
 * `npm run demo` keeps telling the truth: runs examples/demo.mjs with plain Node and checks the
 * table it prints against the DESIGN.md answers.
 */
import { execFileSync } from 'node:child_process'
import { resolve } from 'node:path'
import { expect, it } from 'vitest'

it('examples/demo.mjs prints the expected answers and exits 0', () => {
  const root = resolve(import.meta.dirname, '../..')
  const out = execFileSync(process.execPath, ['examples/demo.mjs'], { cwd: root, encoding: 'utf8', timeout: 20_000 })
  const rows = Object.fromEntries(
    out.split('\n').map((line) => line.split(/ {2,}/)).filter((cells) => cells.length === 4 && !cells[0]!.startsWith('-')).map(([name, ...rest]) => [name, rest.join(' ')]),
  )
  expect(rows).toEqual({
    case: 'status answer handler ran?',
    accepted: '200 processed yes',
    'duplicate (same id, new timestamp)': '200 duplicate no',
    'tampered body': '401 invalid_signature no',
    'stale timestamp (10 min old)': '401 timestamp_too_old no',
    'v1 signature only': '401 v1_not_allowed no',
    'wrong secret': '401 invalid_signature no',
    'not JSON': '400 invalid_json no',
  })
  expect(out.match(/handler: message\.received/g)).toHaveLength(1)
})
