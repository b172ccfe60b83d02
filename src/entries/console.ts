/**
 * `svc-webhooks/console`: `createConsole`, the operator's console as one Fetch handler
 * (src/console/handler.ts), and `toNodeHandler` to mount it on node:http servers (Express,
 * Fastify, Koa). Server-rendered HTML, no external assets, no dependency.
 */
export { createConsole } from '../console/handler.js'
export { toNodeHandler, type NodeHandlerOptions } from '../console/node-bridge.js'
export { escapeHtml } from '../console/html.js'
export type { ConsoleAuthorization, ConsoleInbox, ConsoleOptions, ConsoleReceiver, ConsoleService, ConsoleWorker } from '../console/options.js'
