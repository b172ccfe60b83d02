// `npm run lint`: ESLint with typescript-eslint's recommended rules over the sources, adapters,
// tests, benchmarks and scripts. Formatting is left to the editor; these rules catch bugs
// (floating promises in the core, unused code, accidental `any`).
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '**/node_modules/**', 'examples/**/.next/**', 'test/apps/**/.next/**', 'coverage/**', 'scripts/runtime-binaries/**', 'test/docs/contexts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        console: 'readonly', process: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly',
        setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly', fetch: 'readonly',
        Request: 'readonly', Response: 'readonly', Headers: 'readonly', ReadableStream: 'readonly', TextEncoder: 'readonly',
        TextDecoder: 'readonly', crypto: 'readonly', atob: 'readonly', btoa: 'readonly', globalThis: 'readonly',
        AbortController: 'readonly', AbortSignal: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly',
        performance: 'readonly',
      },
    },
    rules: {
      // Unused bindings are errors, except the `_name` convention for deliberately ignored ones.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', destructuredArrayIgnorePattern: '^_' }],
      // Structural types of optional peers (node-redis, ioredis, pg clients) need `any` in a few signatures.
      '@typescript-eslint/no-explicit-any': 'off',
      // `declare global { namespace Express }` is how Express's Request is augmented.
      '@typescript-eslint/no-namespace': ['error', { allowDeclarations: true }],
    },
  },
  {
    // CommonJS fixtures: an instrumentation's require hook patches only what is loaded with require().
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
)
