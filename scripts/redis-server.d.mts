// Types of scripts/redis-server.mjs for the TypeScript tests.

export interface RedisServer {
  port: number
  url: string
  readonly pid: number | undefined
  kill(): Promise<void>
  start(): Promise<void>
  restart(options?: { signal?: NodeJS.Signals }): Promise<void>
  pause(): void
  resume(): void
  stop(): Promise<void>
}

export function findRedisServer(): string | undefined
export function freePort(): Promise<number>
export function startRedisServer(options?: { persist?: boolean; bin?: string }): Promise<RedisServer>
