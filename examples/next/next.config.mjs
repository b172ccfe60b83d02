// The example lives inside the svc-webhooks repo. `svc-webhooks` resolves from node_modules like
// in any app (see README.md: the package is copied there, not symlinked, so the repo's own
// tsconfig.json `paths` never apply to it). jsconfig.json is there for the same reason: it keeps
// the repo's tsconfig `paths` away from the example's files, without making this a TypeScript
// project (that would make `next build` want @types/react).
import { fileURLToPath } from 'node:url'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/** @type {import('next').NextConfig} */
export default {
  // The case app is imported from the repo's test/support, so every adapter runs the same one.
  outputFileTracingRoot: repo,
  turbopack: {
    root: repo,
    resolveAlias: {
      // test/support imports `./case-table-constants.js` (NodeNext style) from a `.ts` file;
      // Turbopack does not map that to `.ts` outside this folder. Relative to this folder.
      './case-table-constants.js': '../../test/support/case-table-constants.ts',
    },
  },
}
