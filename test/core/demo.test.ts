/**
 * `npm run demo` keeps telling the truth: runs examples/demo.mjs with plain Node and checks the
 * table it prints against the DESIGN.md answers.
 */
import { spawnSync } from 'node:child_process'
import { resolve } from 'node:path'
import { expect, it } from 'vitest'

it('examples/demo.mjs prints the expected answers and exits 0', () => {
  const root = resolve(import.meta.dirname, '../..')
  const { stdout: out, stderr, status } = spawnSync(process.execPath, ['examples/demo.mjs'], { cwd: root, encoding: 'utf8', timeout: 20_000 })
  expect(status, stderr).toBe(0)
  // The table first; what the handler and the receiver's log said under it, on stdout in order.
  expect(stderr).toBe('')
  const lines = out.split('\n')
  expect(lines[2]).toMatch(/^case {2,}status {2,}answer {2,}handler ran\?$/)
  const log = lines.slice(lines.indexOf("The receiver's log (the first refusal of each code; repeats within 10 s are counted into one summary line; never the body or the secret):") + 1).filter(Boolean)
  expect(log.map((line) => /^ {2}svc-webhooks: (\d+ failing answers in a row|\d+ \w+)/.exec(line)?.[1])).toEqual([
    '401 invalid_signature',
    '401 timestamp_too_old',
    '401 v1_not_allowed',
    '400 invalid_json',
  ])
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
  expect(out).toMatch(/^The handler ran once:\n {2}message\.received /m)
})
