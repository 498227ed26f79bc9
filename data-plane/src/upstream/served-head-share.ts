import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import type { NetworkPool } from "./network-pool";

/**
 * Raises the shared served head to ARGV[1] when it is higher and returns the shared value (decimal).
 * ARGV[2]: the key's lifetime in ms (a network that is gone leaves nothing behind for long).
 */
const RAISE_SCRIPT = `
local c = tonumber(redis.call('GET', KEYS[1]) or '-1')
local n = tonumber(ARGV[1])
if n > c then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return n
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return c
`;

/** How long a served head outlives the last instance that raised it (ms). */
const SHARED_HEAD_TTL_MS = 10 * 60_000;

export interface ServedHeadShareOptions {
  redis: RedisClient;
  names: RedisNames;
  logger: Logger;
  /** SERVED_HEAD_SHARE_INTERVAL_MS: how often each pool's served head is raised and read back. */
  intervalMs: number;
  /** The pools to share (UpstreamRegistry). */
  pools: () => Iterable<NetworkPool>;
}

/**
 * Shares each network's served head (NetworkPool.servedHead) between the data plane's threads and
 * instances through Redis, as eRPC shares its served tip: every interval, each pool raises the shared
 * value to its own and takes the shared one in as a head seen in an answer (NetworkPool.observeHead, which
 * ignores heads implausibly far above its nodes'). So a head served anywhere is served everywhere within
 * an interval. Off the hot path (a timer); a failed round is logged and the next one tries again.
 */
export class ServedHeadShare {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(private readonly opts: ServedHeadShareOptions) {}

  start(): void {
    if (this.timer !== undefined || this.opts.intervalMs <= 0) return;
    this.timer = setInterval(() => void this.round(), this.opts.intervalMs);
    this.timer.unref();
  }

  /** One round over every pool; resolves when done (a failure is logged, never thrown). */
  async round(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const { redis, names } = this.opts;
      await Promise.all(
        [...this.opts.pools()].map(async (pool) => {
          const head = pool.servedHead();
          if (head < 0) return;
          const shared = Number(
            await redis.eval(RAISE_SCRIPT, 1, names.servedHead(pool.record.slug), head, SHARED_HEAD_TTL_MS),
          );
          if (shared > head) pool.observeHead(shared);
        }),
      );
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, "could not share served heads");
    } finally {
      this.running = false;
    }
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
