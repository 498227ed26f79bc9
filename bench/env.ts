import os from "node:os";

/** A non-negative integer from the environment, `def` when unset or not one. */
export function envInt(name: string, def: number): number {
  const n = Number.parseInt(process.env[name] ?? "", 10);
  return Number.isFinite(n) && n >= 0 ? n : def;
}

/**
 * The keyed cache-miss load of the on/off sections (bench/variants.ts): request log and tracing read it from
 * BENCH_* variables here, JWT from its own options.
 */
export interface SectionLoadOptions {
  redisUrl: string;
  durationS: number;
  warmupS: number;
  connections: number;
  threads: number;
  repeats: number;
}

export function sectionLoadFromEnv(): SectionLoadOptions {
  return {
    redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    durationS: Math.max(1, envInt("BENCH_DURATION_S", 10)),
    warmupS: envInt("BENCH_WARMUP_S", 2),
    connections: Math.max(1, envInt("BENCH_CONNECTIONS", 64)),
    // wrk's threads: one on a 2-CPU machine, so the gateway and the stub keep the other CPU.
    threads: Math.max(1, envInt("BENCH_THREADS", os.cpus().length <= 2 ? 1 : 2)),
    repeats: Math.max(1, envInt("BENCH_REPEATS", 3)),
  };
}
