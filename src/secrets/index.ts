/**
 * The secret path in one folder, entered here by the verify path: the list of secrets and its
 * keys (list.ts), the source contract (contract.ts), the cache of a source with its pending rules
 * (cache.ts), the `secret` function per request (lookup.ts). Nothing in this folder imports the
 * options or the verify path: they import it.
 */
export { createSourceCache, type SourceCache, type SourceSecretSet, type SourceSettings } from './cache.js'
export { isSecretSource, listProblem, marksOf, stateProblem, type PendingMark, type SecretSource, type SecretState, type SecretWriteCondition } from './contract.js'
export { importSecrets, SECRET_PREFIX, secretProblem, type SecretRecheck, type Secrets, type SecretSet } from './list.js'
export { lookupSecrets, secretsFor, type SecretLookup, type SecretOptions } from './lookup.js'
export { TIMED_OUT, within } from './within.js'
