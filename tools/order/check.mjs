/**
 * The ordering rules, checked from what a run recorded (DESIGN.md "Order within a conversation").
 * Shared by the property test on MemoryInbox, the multi-process runs on Redis and Postgres and
 * the order benchmark. Plain .mjs (JSDoc types) so node runs it without a loader.
 *
 * A run records, per delivery: its key, its created_at order, when it was appended (a sequence
 * or a time), and every handler run: start and end (same clock), whether it succeeded, `late`.
 *
 * @typedef {{ id: string, key: string, order: string, appendedAt: number }} Delivery
 * @typedef {{ id: string, start: number, end: number, ok: boolean, late?: boolean, takenAt?: number }} Run
 * @typedef {{ id: string }} Dead
 */

/**
 * Every rule broken, as lines (empty when none):
 * - never two runs of one key at once;
 * - strict: a run starts only once every delivery of its key with a lower order, appended before
 *   the run was taken (`takenAt`, or its start), has ended (succeeded or dead) before it;
 * - every delivery succeeded exactly once or is dead (0 lost, 0 twice), none succeeded after dying;
 * - `late` is true exactly when a delivery of the key with a higher order had succeeded first.
 *
 * @param {{ deliveries: Delivery[], runs: Run[], dead: Dead[], strict?: boolean, checkLate?: boolean }} record
 * @returns {string[]}
 */
export function orderViolations({ deliveries, runs, dead, strict = true, checkLate = true }) {
  const problems = []
  const byId = new Map(deliveries.map((d) => [d.id, d]))
  const deadIds = new Set(dead.map((d) => d.id))
  const say = (line) => {
    if (problems.length < 20) problems.push(line)
  }
  /** @type {Map<string, Run[]>} */
  const runsByKey = new Map()
  /** @type {Map<string, number>} when each delivery's successful run ended */
  const succeededAt = new Map()
  for (const run of runs) {
    const d = byId.get(run.id)
    if (!d) {
      say(`a run of an unknown delivery ${run.id}`)
      continue
    }
    if (!runsByKey.has(d.key)) runsByKey.set(d.key, [])
    runsByKey.get(d.key).push(run)
    if (run.ok) {
      if (succeededAt.has(run.id)) say(`delivery ${run.id} succeeded twice`)
      succeededAt.set(run.id, run.end)
    }
  }
  for (const d of deliveries) {
    const ok = succeededAt.has(d.id)
    const isDead = deadIds.has(d.id)
    if (!ok && !isDead) say(`delivery ${d.id} (key ${d.key}) was lost: never succeeded, not dead`)
    if (ok && isDead) say(`delivery ${d.id} both succeeded and is dead`)
  }
  /** When a dead delivery ended: its last run's end. */
  const endedAt = (id) => {
    if (succeededAt.has(id)) return succeededAt.get(id)
    let last = -Infinity
    for (const run of runs) if (run.id === id && run.end > last) last = run.end
    return deadIds.has(id) ? last : Infinity
  }
  for (const [key, list] of runsByKey) {
    const sorted = [...list].sort((a, b) => a.start - b.start)
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i].start < sorted[i - 1].end) say(`key ${key}: runs of ${sorted[i - 1].id} and ${sorted[i].id} overlapped`)
    }
    const members = deliveries.filter((d) => d.key === key)
    for (const run of sorted) {
      const d = byId.get(run.id)
      const taken = run.takenAt ?? run.start
      if (strict) {
        for (const e of members) {
          if (e.order < d.order && e.appendedAt < taken && !(endedAt(e.id) <= run.start)) {
            say(`key ${key}: ${d.id} (order ${d.order}) started before the older ${e.id} (order ${e.order}) had ended`)
          }
        }
      }
      if (checkLate) {
        const after = members.some((e) => e.order > d.order && succeededAt.has(e.id) && succeededAt.get(e.id) <= run.start)
        if (after !== (run.late === true)) say(`key ${key}: ${d.id} ran with late=${run.late === true}, expected ${after}`)
      }
    }
  }
  return problems
}
