// context: an ES module holding the `inbox` of docs/inbox.md (any engine's inbox has the same
// calls); it exits once the fragment has run.
// runs as: script
import { MemoryInbox } from 'svc-webhooks'

const inbox = new MemoryInbox()
/* fragment */
process.exit(0)
