/**
 * svc-webhooks/service: the service's own webhook-endpoint API (spec/service-api.md §4.1) and the
 * endpoint's life around the receiver: the client, secret rotation and registration without a
 * permanent refusal, and the watch that re-enables a disabled endpoint.
 */
export type {
  CreateEndpointInput,
  ServiceClient,
  UpdateEndpointInput,
  ValidationIssue,
  WebhookEndpoint,
} from './types.js'
export type { SecretSource, SecretState } from '../secrets/index.js'
export {
  createServiceClient,
  isServiceApiError,
  ServiceApiError,
  type ServiceApiErrorCode,
  type ServiceAttempt,
  type ServiceClientOptions,
} from './client.js'
export { FileSecretSource, type FileSecretSourceOptions } from './file-source.js'
export {
  EndpointLifecycleError,
  finishEndpointRotation,
  registerEndpoint,
  rotateEndpointSecret,
  type EndpointRotation,
  type RegisterEndpointOptions,
  type RotateEndpointSecretOptions,
} from './rotate.js'
export {
  endpointWatcher,
  watchEndpoint,
  type EndpointWatch,
  type EndpointWatcher,
  type EndpointWatchOption,
  type EndpointWatchView,
  type WatchEndpointOptions,
} from './watch.js'
export type { ReadinessParts } from './readiness.js'
