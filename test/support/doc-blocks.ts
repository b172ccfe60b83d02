/**
 * The fenced blocks of README.md and docs/*.md, and what each one declares itself to be. Shared
 * by the docs suites, which run every block of code (test/docs/docs.test.ts: whole files;
 * test/docs/fragments.test.ts: fragments spliced into their context).
 *
 * The convention, as docs/development.md states it for whoever writes a page:
 * - every fence names its language; `sh` for commands, `text` for output and signatures, `toml`,
 *   `json`... for files that are not code (NOT_RUN);
 * - a js/ts block starts with `// server.ts` (a whole file, run as pasted) or with
 *   `// fragment of <context>: <what the reader needs to know>`, where `<context>` is a file of
 *   test/docs/contexts/ whose `/* fragment *\/` line the block replaces.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

export const root = resolve(import.meta.dirname, '../..')
export const contextsDir = join(root, 'test/docs/contexts')

export const PAGES = ['README.md', ...readdirSync(join(root, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)]

/** Languages whose blocks are code the suites run. */
export const CODE = new Set(['js', 'mjs', 'cjs', 'ts', 'mts', 'tsx'])
/** Languages of blocks that are not run: commands, output, signatures, config files (the toml of a Worker is checked by its own test). */
export const NOT_RUN = new Set(['sh', 'text', 'toml', 'json', 'jsonc', 'http', 'yaml', 'ini', 'dotenv', 'diff'])

export interface Block {
  page: string
  /** 1-based line of the opening fence. */
  line: number
  lang: string
  code: string
}

/** Every fenced block of a page (a block indented under a list item included); `lang` is '' when the fence names none. */
export function blocksOf(page: string): Block[] {
  const text = readFileSync(join(root, page), 'utf8')
  const found: Block[] = []
  for (const m of text.matchAll(/^( *)```(\w*)\n([\s\S]*?)^\1```$/gm)) {
    const indent = m[1]!.length
    const code = m[3]!
      .split('\n')
      .map((l) => l.slice(indent))
      .join('\n')
    found.push({ page, line: text.slice(0, m.index).split('\n').length, lang: m[2]!, code })
  }
  return found
}

/** The file a block names on its first line (`// server.ts`, `// src/worker.ts: ...`), if any. */
export const WHOLE_FILE = /^\/\/ ((?:[\w.-]+\/)*[\w.-]+\.(?:m?[jt]s|cjs|cts|tsx))(?::|$|\s)/
/** `// fragment of express-server: in place of its route` */
export const FRAGMENT = /^\/\/ fragment of ([\w-]+)(?::|$)/

/** The contexts a fragment can name: test/docs/contexts/<name>.ts for ts blocks, <name>.mjs for js ones. */
export function contexts(): Set<string> {
  return new Set(existsSync(contextsDir) ? readdirSync(contextsDir).filter((f) => /\.(ts|mjs)$/.test(f)) : [])
}

/** The context file of a fragment block (which may not exist). */
export function contextOf(block: Block): string | undefined {
  const name = FRAGMENT.exec(block.code)?.[1]
  return name === undefined ? undefined : `${name}.${['js', 'mjs'].includes(block.lang) ? 'mjs' : 'ts'}`
}

export const HOW_TO_MARK =
  'Start a js/ts block with its file name (`// server.ts`) if it runs as pasted, or with ' +
  '`// fragment of <context>: <what the reader needs>` where <context> is a file of test/docs/contexts/ ' +
  '(its `/* fragment */` line is replaced by the block; add a context if none fits). Commands are ```sh, ' +
  'output and signatures ```text. See docs/development.md#docs-are-code.'

/** What is wrong with a block's marking, or undefined: the message names the page, the line and the fix. */
export function misMarked(block: Block, known = contexts()): string | undefined {
  const where = `${block.page}:${block.line}`
  const first = block.code.split('\n')[0] ?? ''
  if (block.lang === '') return `${where}: a fence without a language: \`\`\`sh for commands, \`\`\`text for output, or js/ts code`
  if (NOT_RUN.has(block.lang)) return undefined
  if (!CODE.has(block.lang)) return `${where}: \`\`\`${block.lang} is neither code the suite runs (${[...CODE].join(', ')}) nor a declared kind (${[...NOT_RUN].join(', ')})`
  if (WHOLE_FILE.test(first)) return undefined
  if (!FRAGMENT.test(first)) return `${where}: "${first}" says neither its file nor its context: start it with \`// server.ts\` or \`// fragment of <context>: ...\``
  const context = contextOf(block)!
  if (!known.has(context)) return `${where}: no context test/docs/contexts/${context} (there are: ${[...known].sort().join(', ')}): name one, or add yours with a \`/* fragment */\` line`
  return undefined
}

export const allBlocks = (): Block[] => PAGES.flatMap(blocksOf)
