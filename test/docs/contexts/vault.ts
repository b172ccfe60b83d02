// context: `vault`, your secrets manager's client, with a check-and-set on a version (here a
// Map): `getWithVersion(path)` and `putIfVersion(path, text, version?)`, false when the version
// moved. After the fragment, `source` is read, written under its version, and read again.
// runs as: script
const stored = new Map([['svc-webhooks/endpoint', { value: JSON.stringify({ secrets: [process.env.SVC_WEBHOOK_SECRET!] }), version: 1 }]])
const vault = {
  getWithVersion: async (path: string) => stored.get(path)!,
  putIfVersion: async (path: string, value: string, version?: number) => {
    const current = stored.get(path)
    if (version !== undefined && current?.version !== version) return false
    stored.set(path, { value, version: (current?.version ?? 0) + 1 })
    return true
  },
}
/* fragment */
const state = await source.read()
if (state.secrets.length !== 1 || (await source.write!({ secrets: ['svc_whsec_next', ...state.secrets] }, { version: state.version! })) !== true) process.exit(1)
console.log((await source.read()).secrets.length, 'secrets')
process.exit(0)
