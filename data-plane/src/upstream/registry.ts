import type { Logger } from "../../../shared/src/log/logger";
import type { HealthRecord, NetworkRecord } from "../../../shared/src/redis/records";
import type { Metrics } from "../metrics/metrics";
import { NetworkPool, type PoolOptions } from "./network-pool";

/** Every network's upstream pool, replaced live when the networks hash changes. */
export class UpstreamRegistry {
  private readonly pools = new Map<string, NetworkPool>();
  private timer: NodeJS.Timeout | undefined;
  private stateTimer: NodeJS.Timeout | undefined;
  private checking = false;
  private probingStates = false;

  constructor(
    /** stateProbeIntervalMs: UPSTREAM_STATE_PROBE_INTERVAL_MS (0 = no state probes). */
    private readonly opts: PoolOptions & { healthCheckIntervalMs: number; stateProbeIntervalMs?: number },
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {}

  get(slug: string): NetworkPool | undefined {
    return this.pools.get(slug);
  }

  /** Every network's health snapshot (health-publisher.ts). */
  healthSnapshot(): HealthRecord["networks"] {
    return [...this.pools].map(([slug, pool]) => ({ slug, ...pool.healthSnapshot() }));
  }

  /** Every pool now. */
  all(): IterableIterator<NetworkPool> {
    return this.pools.values();
  }

  slugs(): string[] {
    return [...this.pools.keys()];
  }

  /**
   * Makes the set of pools match `records`; new or changed pools get a health check at once, then (not
   * awaited: readiness does not wait for it) a state probe of the upstreams not probed yet.
   */
  async apply(records: readonly NetworkRecord[]): Promise<void> {
    const seen = new Set<string>();
    const fresh: NetworkPool[] = [];
    for (const r of records) {
      seen.add(r.slug);
      const existing = this.pools.get(r.slug);
      if (existing !== undefined) {
        existing.update(r);
        fresh.push(existing);
      } else {
        const pool = new NetworkPool(r, this.opts, this.metrics);
        this.pools.set(r.slug, pool);
        fresh.push(pool);
      }
    }
    for (const [slug, pool] of this.pools) {
      if (!seen.has(slug)) {
        this.pools.delete(slug);
        void pool.close();
      }
    }
    this.logger.info({ networks: [...seen] }, "upstream pools applied");
    await Promise.all(fresh.map((p) => p.healthCheck()));
    if ((this.opts.stateProbeIntervalMs ?? 0) > 0) {
      void Promise.all(fresh.map((p) => p.probeStates(true))).catch((err: Error) =>
        this.logger.warn({ err: err.message }, "state probe failed"),
      );
    }
  }

  startHealthChecks(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.checkAll(), this.opts.healthCheckIntervalMs);
    this.timer.unref();
    const stateMs = this.opts.stateProbeIntervalMs ?? 0;
    if (stateMs > 0) {
      this.stateTimer = setInterval(() => void this.probeAllStates(), stateMs);
      this.stateTimer.unref();
    }
  }

  /** One state-probe round over every pool (skipped while the previous one still runs). */
  private async probeAllStates(): Promise<void> {
    if (this.probingStates) return;
    this.probingStates = true;
    try {
      await Promise.all([...this.pools.values()].map((p) => p.probeStates()));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, "state probe round failed");
    } finally {
      this.probingStates = false;
    }
  }

  private async checkAll(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all([...this.pools.values()].map((p) => p.healthCheck()));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, "health check round failed");
    } finally {
      this.checking = false;
    }
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (this.stateTimer !== undefined) clearInterval(this.stateTimer);
    this.stateTimer = undefined;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((p) => p.close()));
  }
}
