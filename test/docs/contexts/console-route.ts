// context: a module of your app that builds `ops`, the console of docs/console.md (here over a
// MemoryHistory), and exports the route's methods: a Next.js route file, type-checked.
// runs as: typecheck
import { MemoryHistory } from 'svc-webhooks/history'
import { createConsole } from 'svc-webhooks/console'

const ops = createConsole({ authorize: () => false, history: new MemoryHistory() })
/* fragment */
