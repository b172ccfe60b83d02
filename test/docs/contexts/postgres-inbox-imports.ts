// context: an ES module with `pg` and `PostgresInbox` imported, $DATABASE_URL set; it exits
// once the fragment has run.
// runs as: script
import pg from 'pg'
import { PostgresInbox } from 'svc-webhooks/postgres'
/* fragment */
process.exit(0)
