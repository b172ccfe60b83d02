/**
 * `svc-webhooks/testing`: what a user needs to test their own receiver. Signs deliveries exactly
 * as the service does, builds them as Fetch `Request`s, fixes the clock, and provides sample
 * events (signing.ts). Runtime-neutral: no `node:` import, so it runs in Workers and Edge tests
 * too. Also the service emulator (service/emulator.ts), which imports `node:http` only when it is
 * started.
 */
export {
  computeSignature,
  createSignedRequest,
  fixedClock,
  sampleEvent,
  sampleEvents,
  serializeEvent,
  signWebhook,
  type FixedClock,
  type SignedRequestOptions,
  type SignedWebhook,
  type SignWebhookOptions,
} from './signing.js'
export {
  createServiceEmulator,
  type EmulatedAttempt,
  type EmulatedDelivery,
  type ServiceEmulator,
  type ServiceEmulatorOptions,
} from './service/emulator.js'
