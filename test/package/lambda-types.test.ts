/**
 * `svc-webhooks/lambda` typechecks for its users (built dist/). A user installs svc-webhooks and
 * nothing else: the Lambda snippet of docs/lambda.md compiles under `strict` with `skipLibCheck: false`,
 * in an ES module and a CommonJS project (node16) and under `bundler` resolution, with no
 * @types/aws-lambda anywhere in reach. A user who does have @types/aws-lambda can assign the
 * handler to its handler types and pass it the real event types.
 */
import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '../..')
const tsc = join(root, 'node_modules/typescript/lib/tsc.js')

/** Every ```ts block of docs/lambda.md that imports `svc-webhooks/lambda`, as written. */
function readmeSnippets(): string[] {
  const readme = readFileSync(join(root, 'docs/lambda.md'), 'utf8')
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((code) => code.includes("from 'svc-webhooks/lambda'"))
}

/** What a snippet may leave to the reader: the application's own code. */
const APP_CODE = `
import type { MessageReceivedEvent } from 'svc-webhooks'
declare function saveMessage(deliveryId: string, message: MessageReceivedEvent['message']): Promise<void>
`

const STRICT = { strict: true, skipLibCheck: false, noEmit: true, target: 'ES2022', lib: ['ES2022'], types: ['node'] }
const PROJECTS = [
  { name: 'node16, ES module', type: 'module', compilerOptions: { module: 'node16', moduleResolution: 'node16' } },
  { name: 'node16, CommonJS', type: 'commonjs', compilerOptions: { module: 'node16', moduleResolution: 'node16' } },
  { name: 'bundler', type: 'module', compilerOptions: { module: 'esnext', moduleResolution: 'bundler' } },
]

/** A project dir whose node_modules holds svc-webhooks as npm installs it (package.json + dist/). */
function install(dir: string, types: string[]): void {
  const pkg = join(dir, 'node_modules/svc-webhooks')
  mkdirSync(pkg, { recursive: true })
  cpSync(join(root, 'package.json'), join(pkg, 'package.json'))
  cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true })
  mkdirSync(join(dir, 'node_modules/@types'), { recursive: true })
  for (const name of types) symlinkSync(join(root, 'node_modules/@types', name), join(dir, 'node_modules/@types', name), 'dir')
}

function project(dir: string, type: string, compilerOptions: object, files: Record<string, string>): string {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', private: true, type }))
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...STRICT, ...compilerOptions }, files: Object.keys(files) }))
  for (const [name, code] of Object.entries(files)) writeFileSync(join(dir, name), code)
  return dir
}

/** The repository's TypeScript on `dir`'s tsconfig.json: exit code and everything it printed. */
function compile(dir: string): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json'), '--pretty', 'false'], { cwd: dir })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', fail)
    child.on('close', (code) => done({ code, output: output.trim() }))
  })
}

let tmp: string
beforeAll(() => {
  if (!existsSync(join(root, 'dist/lambda.d.ts'))) throw new Error('dist/ is missing: run `npm run build` first')
  tmp = mkdtempSync(join(tmpdir(), 'svc-webhooks-lambda-types-'))
})
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

describe('svc-webhooks/lambda types without @types/aws-lambda (what npm installs)', () => {
  let app: string
  beforeAll(() => {
    app = join(tmp, 'no-aws-lambda')
    install(app, ['node'])
  })

  it('docs/lambda.md has the Lambda snippet', () => {
    expect(readmeSnippets().length).toBeGreaterThan(0)
  })

  it('the built declarations name no aws-lambda module', () => {
    for (const file of ['dist/lambda.d.ts', 'dist/lambda.d.cts']) {
      expect(readFileSync(join(root, file), 'utf8'), file).not.toMatch(/['"]aws-lambda['"]/)
    }
  })

  it('aws-lambda is out of reach of these projects (or the compiles below would prove nothing)', async () => {
    const dir = project(join(app, 'control'), 'module', PROJECTS[0]!.compilerOptions, {
      'control.ts': "import type { Context } from 'aws-lambda'\nexport type C = Context\n",
    })
    const { code, output } = await compile(dir)
    expect(code).not.toBe(0)
    expect(output).toContain('TS2307')
  })

  it.each(PROJECTS)('the docs snippet compiles: strict, no skipLibCheck, $name', async ({ name, type, compilerOptions }) => {
    const files = Object.fromEntries(readmeSnippets().map((code, i) => [`handler-${i}.ts`, code.includes('function saveMessage') ? code : code + APP_CODE]))
    const dir = project(join(app, name.replace(/\W+/g, '-')), type, compilerOptions, files)
    expect(await compile(dir)).toEqual({ code: 0, output: '' })
  })
})

/** Assignments a user with @types/aws-lambda writes, and calls with its real event types. */
const WITH_AWS_LAMBDA = `
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyHandler,
  APIGatewayProxyHandlerV2,
  APIGatewayProxyHandlerV2WithJWTAuthorizer,
  APIGatewayProxyResult,
  APIGatewayProxyStructuredResultV2,
  APIGatewayProxyWithLambdaAuthorizerHandler,
  Context,
  Handler,
  LambdaFunctionURLEvent,
  LambdaFunctionURLHandler,
} from 'aws-lambda'
import { webhooks, type LambdaWebhookEvent, type LambdaWebhookOptions, type LambdaWebhookResult } from 'svc-webhooks/lambda'

const options: LambdaWebhookOptions = {
  secret: process.env.SVC_WEBHOOK_SECRET!,
  on: { 'message.received': async (event) => { console.log(event.message.text) } },
}

export const handler: Handler = webhooks(options)
export const rest: APIGatewayProxyHandler = webhooks(options)
export const restAuthorized: APIGatewayProxyWithLambdaAuthorizerHandler<{ userId: string }> = webhooks(options)
export const httpApi: APIGatewayProxyHandlerV2 = webhooks(options)
export const httpApiJwt: APIGatewayProxyHandlerV2WithJWTAuthorizer = webhooks(options)
export const functionUrl: LambdaFunctionURLHandler = webhooks(options)
export const checked = webhooks(options) satisfies APIGatewayProxyHandler & APIGatewayProxyHandlerV2

declare const v1: APIGatewayProxyEvent
declare const v2: APIGatewayProxyEventV2
declare const url: LambdaFunctionURLEvent
declare const context: Context
export const events: LambdaWebhookEvent[] = [v1, v2, url]

const handle = webhooks(options)
export async function invoke(): Promise<Array<APIGatewayProxyResult | APIGatewayProxyStructuredResultV2>> {
  const a: LambdaWebhookResult = await handle(v1, context)
  const b: APIGatewayProxyResult = await handle(v2, context)
  const c: APIGatewayProxyStructuredResultV2 = await handle(url)
  // @ts-expect-error not a Lambda HTTP event: neither httpMethod nor requestContext.http
  await handle({ body: '{}', headers: {}, isBase64Encoded: false })
  // @ts-expect-error not an event at all
  await handle('POST')
  return [a, b, c]
}
`

describe('svc-webhooks/lambda types with @types/aws-lambda installed', () => {
  it.each(PROJECTS)('its handler types take the handler and its events reach it: strict, exactOptionalPropertyTypes, $name', async ({ name, type, compilerOptions }) => {
    const app = join(tmp, `with-aws-lambda-${name.replace(/\W+/g, '-')}`)
    install(app, ['node', 'aws-lambda'])
    const dir = project(app, type, { ...compilerOptions, exactOptionalPropertyTypes: true }, {
      'handler.ts': WITH_AWS_LAMBDA,
    })
    expect(await compile(dir)).toEqual({ code: 0, output: '' })
  })
})
