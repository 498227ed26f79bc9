import type { Redis } from "ioredis";
import type { Clock } from "../../../../data-plane/src/ratelimit/clock";

/** A clock the test moves by hand (epoch ms). */
export class FakeClock implements Clock {
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/**
 * Just enough of ioredis for `RedisReconciledRateLimiter`: the sync and heartbeat scripts evaluated over
 * in-memory state shared by every limiter built on the same `FakeRateLimitRedis`. `down` makes every command fail,
 * as a closed connection does.
 */
export class FakeRateLimitRedis {
  readonly hashes = new Map<string, Map<string, number>>();
  readonly live = new Set<string>();
  down = false;
  calls = 0;

  /** A distinct client object (as two ioredis connections would be) over the shared store. */
  client(): Redis {
    const store = this;
    const c: Record<string, unknown> = {
      status: "ready",
      defineCommand(name: string) {
        c[name] =
          name === "rgRateLimitSync"
            ? async (key: string, instanceId: string, count: number) => store.sync(key, instanceId, count)
            : async (_key: string, instanceId: string) => store.heartbeat(instanceId);
      },
      async hdel() {
        return 1;
      },
      on() {
        return c;
      },
      off() {
        return c;
      },
    };
    return c as unknown as Redis;
  }

  /** The heartbeat: every instance that has announced itself stays live (the fake never expires one). */
  private heartbeat(instanceId: string): number {
    if (this.down) throw new Error("Connection is closed.");
    this.live.add(instanceId);
    return this.live.size;
  }

  private async sync(key: string, instanceId: string, count: number): Promise<[number, number]> {
    this.calls++;
    if (this.down) throw new Error("Connection is closed.");
    let h = this.hashes.get(key);
    if (h === undefined) {
      h = new Map();
      this.hashes.set(key, h);
    }
    if (count > (h.get(instanceId) ?? 0)) h.set(instanceId, count);
    let sum = 0;
    let n = 0;
    for (const [field, v] of h) {
      if (field !== instanceId) {
        sum += v;
        n++;
      }
    }
    return [sum, n];
  }
}
