/**
 * The contract both crypto builds implement: `node.ts` (node:crypto, for Node.js, Bun and Deno)
 * and `web.ts` (WebCrypto, for workerd, the Next.js Edge runtime and the rest). package.json
 * "imports" picks one by export condition at run time; the core is typechecked against this file
 * (tsconfig paths map `#crypto` here), so it cannot lean on one build's details, such as the
 * node:crypto HMAC answering synchronously.
 */
import type * as NodeBuild from './node.js'
import type * as WebBuild from './web.js'

/** A secret imported once for the life of the options. Opaque to the core. */
export type SecretKey = { readonly __brand: 'svc-webhooks.SecretKey' }

/** What a crypto build exports. */
export interface CryptoBuild<Key> {
  /** Imports a secret (UTF-8 bytes of the string) once. */
  importSecret(secret: string): Key
  /**
   * HMAC-SHA256(key, prefix || body) as 64 lowercase hex digits, the form the signature headers
   * carry: synchronous on node:crypto, a promise on WebCrypto.
   */
  hmacHex(key: Key, prefix: string, body: Uint8Array): string | Promise<string>
  /**
   * Whether HMAC-SHA256(key, prefix || body) is one of `signatures` (64 lowercase hex digits each),
   * each compared in constant time: synchronous on node:crypto, a promise on WebCrypto.
   */
  hmacMatches(key: Key, prefix: string, body: Uint8Array, signatures: readonly string[]): boolean | Promise<boolean>
  /** Strict UTF-8 decoding (a leading BOM dropped, invalid bytes throw). */
  decodeUtf8(bytes: Uint8Array): string
}

/** Fails to compile when a build drifts from the contract. */
type Implements<Build extends CryptoBuild<Key>, Key> = Build
export type CheckedNodeBuild = Implements<typeof NodeBuild, NodeBuild.SecretKey>
export type CheckedWebBuild = Implements<typeof WebBuild, WebBuild.SecretKey>

export declare const importSecret: CryptoBuild<SecretKey>['importSecret']
export declare const hmacHex: CryptoBuild<SecretKey>['hmacHex']
export declare const hmacMatches: CryptoBuild<SecretKey>['hmacMatches']
export declare const decodeUtf8: CryptoBuild<SecretKey>['decodeUtf8']
