import type { DataSource } from "typeorm";
import type { RedisClient } from "../../../shared/src/redis/connect";

/** A dependency that does not answer within this is down (a probe must answer well within its own timeout). */
const CHECK_TIMEOUT_MS = 2_000;
/**
 * One check's result serves every /readyz within this: probes and hostile clients alike cost at most one
 * Postgres query and one Redis PING per second.
 */
const RESULT_TTL_MS = 1_000;

export type DependencyState = "ok" | "down";

export interface Readiness {
  ready: boolean;
  postgres: DependencyState;
  redis: DependencyState;
}

function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * The control plane's `/readyz`: Postgres answers `SELECT 1` and Redis answers `PING`, each within
 * CHECK_TIMEOUT_MS. `/healthz` stays liveness (the process serves), so an orchestrator takes the control
 * plane out of rotation while a dependency is down instead of restarting it. Concurrent calls share one
 * check; a result is reused for RESULT_TTL_MS.
 */
export class ReadinessCheck {
  private last: { at: number; result: Readiness } | undefined;
  private running: Promise<Readiness> | undefined;

  constructor(
    private readonly ds: DataSource,
    private readonly redis: RedisClient,
    private readonly now: () => number = Date.now,
  ) {}

  check(): Promise<Readiness> {
    if (this.last !== undefined && this.now() - this.last.at < RESULT_TTL_MS)
      return Promise.resolve(this.last.result);
    this.running ??= this.run().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async run(): Promise<Readiness> {
    const [postgres, redis] = await Promise.all([
      within(this.ds.query("SELECT 1"), CHECK_TIMEOUT_MS).then(
        () => "ok" as const,
        () => "down" as const,
      ),
      // Not connected: down at once (a command would wait in the offline queue for the reconnect).
      this.redis.status !== "ready"
        ? Promise.resolve("down" as const)
        : within(this.redis.ping(), CHECK_TIMEOUT_MS).then(
            () => "ok" as const,
            () => "down" as const,
          ),
    ]);
    const result = { ready: postgres === "ok" && redis === "ok", postgres, redis };
    this.last = { at: this.now(), result };
    return result;
  }
}
