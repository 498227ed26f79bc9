import { createHash } from "node:crypto";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { tooManyRequests } from "../common/errors";
import { throttleSubject } from "./client-ip";

/**
 * Fixed-window counter in Redis per client IP (IPv6: per /64; as LoginRateLimiter): every signUp call counts, valid or
 * not, so a flood of account creations from one address is refused (TOO_MANY_REQUESTS) before any
 * password hashing or database write.
 */
export class SignUpRateLimiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly maxPerIp: number,
    private readonly windowSeconds: number,
  ) {}

  async hit(ip: string): Promise<void> {
    const key = this.names.signUpAttempts(
      createHash("sha256").update(throttleSubject(ip), "utf8").digest("hex").slice(0, 32),
    );
    const res =
      (await this.redis.multi().incr(key).expire(key, this.windowSeconds, "NX").pttl(key).exec()) ?? [];
    const count = Number(res[0]?.[1] ?? 0);
    const pttl = Number(res[2]?.[1] ?? 0);
    if (count > this.maxPerIp) {
      throw tooManyRequests(
        `Too many sign-ups from this address (limit ${this.maxPerIp} per ${this.windowSeconds} s); try again later`,
        Math.max(1, Math.ceil((pttl > 0 ? pttl : this.windowSeconds * 1000) / 1000)),
      );
    }
  }
}
