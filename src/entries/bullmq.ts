/**
 * `svc-webhooks/bullmq`: BullMQ as the durable inbox, `BullMQInbox` to append and
 * `createBullMQProcessor` to run the handlers (src/engines/bullmq.ts). `bullmq` is an optional
 * peer: the engine talks to the Queue and Job it is given.
 */
export * from '../engines/bullmq.js'
