/**
 * Base64 for bytes with the Web globals `btoa` and `atob`, so it runs wherever the core does
 * (Node, Bun, Deno, workerd, the Edge runtime) without a dependency; where a global `Buffer`
 * exists (Node, Bun, Deno) encoding goes through it, as `btoa` over a string built from the
 * bytes costs more CPU than the rest of an append to a job queue. Shared by the Queue inbox and
 * the job-queue engines (the raw body in JSON) and the Lambda adapter (a base64-encoded event
 * body); not a public entry.
 */

/** Node's `Buffer` where the runtime has one, found as a global so nothing is imported. */
const NodeBuffer = (globalThis as { Buffer?: { from(data: ArrayBufferLike, offset: number, length: number): { toString(encoding: 'base64'): string } } }).Buffer

/**
 * The bytes as standard base64 (with padding).
 *
 * @example
 * toBase64(new Uint8Array([104, 105])) // 'aGk='
 */
export function toBase64(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
  // In chunks: spreading a whole large body into one call would exceed the argument limit.
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

/**
 * The bytes standard base64 stands for; throws (`atob`'s DOMException) on text that is not base64.
 *
 * @example
 * fromBase64('aGk=') // Uint8Array [104, 105]
 */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}
