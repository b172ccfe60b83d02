/**
 * A private Postgres (tools/postgres.mjs) and a `pg` Pool to it for one describe block: started
 * before its tests, stopped after them. Call inside `describeWithPostgres`.
 *
 * @example
 * describeWithPostgres('PostgresInbox', () => {
 *   const postgres = usePostgresServer({ max: 12 })
 *   it('...', async () => { const inbox = new PostgresInbox({ pool: postgres.pool }) })
 * })
 */
import pg from 'pg'
import { afterAll, beforeAll } from 'vitest'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'

export interface PostgresUnderTest {
  readonly server: PostgresServer
  readonly pool: pg.Pool
}

/** `max`: the pool's connections (as many as the takes a test races). */
export function usePostgresServer({ max = 10 }: { max?: number } = {}): PostgresUnderTest {
  const state = {} as { server: PostgresServer; pool: pg.Pool }
  beforeAll(async () => {
    state.server = await startPostgresServer()
    state.pool = new pg.Pool({ connectionString: state.server.url, max })
  }, 60_000)
  afterAll(async () => {
    await state.pool?.end()
    await state.server?.stop()
  })
  return state
}
