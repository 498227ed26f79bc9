import { createHash } from "node:crypto";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { tooManyRequests } from "../common/errors";
import { throttleSubject } from "./client-ip";

/**
 * Fixed-window counters in Redis: every login attempt counts against the email and against the client IP (IPv6: its /64);
 * once either exceeds `maxAttempts` within `windowSeconds` the attempt is refused (TOO_MANY_REQUESTS)
 * before the password is checked.
 */
export class LoginRateLimiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly maxAttempts: number,
    private readonly windowSeconds: number,
  ) {}

  private static subject(v: string): string {
    return createHash("sha256").update(v, "utf8").digest("hex").slice(0, 32);
  }

  async hit(email: string, ip: string): Promise<void> {
    const keys = [
      this.names.loginAttempts("email", LoginRateLimiter.subject(email)),
      this.names.loginAttempts("ip", LoginRateLimiter.subject(throttleSubject(ip))),
    ];
    // One MULTI per counter: the two keys hash to different Redis Cluster slots, and each counter only
    // needs its own INCR, first EXPIRE and PTTL to be atomic.
    const res = await Promise.all(
      keys.map(
        async (k) =>
          (await this.redis.multi().incr(k).expire(k, this.windowSeconds, "NX").pttl(k).exec()) ?? [],
      ),
    );
    for (let i = 0; i < keys.length; i++) {
      const count = Number(res[i]![0]?.[1] ?? 0);
      const pttl = Number(res[i]![2]?.[1] ?? 0);
      if (count > this.maxAttempts) {
        throw tooManyRequests(
          "Too many login attempts; try again later",
          Math.max(1, Math.ceil((pttl > 0 ? pttl : this.windowSeconds * 1000) / 1000)),
        );
      }
    }
  }
}
