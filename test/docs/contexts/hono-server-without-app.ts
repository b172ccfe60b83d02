// context: docs/hono.md's server.ts without `const app` and its route (the fragment makes
// both); `app` is served on $PORT after.
// runs as: server
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { webhooks } from 'svc-webhooks/hono'

/* fragment */
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' })
