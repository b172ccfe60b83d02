// Types of scripts/soak-harness.mjs for test/soak.test.ts.

export interface SoakOptions {
  count?: number
  concurrency?: number
  clients?: ('ioredis' | 'node-redis')[]
  failRate?: number
  duplicateRate?: number
  restartAt?: number
  downMs?: number
  log?: (line: string) => void
}

export interface SoakFigures {
  deliveries: number
  duplicatesSent: number
  concurrentResends: number
  laterResends: number
  copies: number
  attempts: number
  retries: number
  timeouts: number
  networkErrors: number
  permanent: { id: string; status: number }[]
  gaveUp: string[]
  maxConsecutiveFailures: number
  statuses: Record<string, number>
  latencyMs: { p50: number; p99: number; max: number }
  elapsedMs: number
  redisRestarted: boolean
  downMs: number
  failuresInjected: number
  processed: number
  lost: string[]
  doubled: string[]
  unknown: string[]
  answered2xxButNotProcessed: string[]
  receivers: { client?: string; outcomes?: Record<string, number>; completeFailures?: number; error?: string }[]
}

export function runSoak(options?: SoakOptions): Promise<SoakFigures>
