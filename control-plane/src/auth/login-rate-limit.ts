import { createHash } from "node:crypto";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { tooManyRequests } from "../common/errors";
import { throttleSubject } from "./client-ip";

export interface LoginThrottleOptions {
  /** Log-in attempts one client address (IPv6: its /64) may make, over all emails, per `windowSeconds`. */
  maxAttemptsPerAddress: number;
  windowSeconds: number;
  /** Failed attempts one email may take from one address before its back-off starts. */
  freeFailures: number;
  /** The first back-off (after `freeFailures` failures); doubles with each further failure up to the max. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /**
   * Attempts one email may take from all addresses together per `emailWindowSeconds`: a ceiling against
   * guessing spread over many addresses, set far above what a handful of addresses can reach with the
   * per-pair back-off (about 20 an hour each with the defaults).
   */
  maxAttemptsPerEmail: number;
  emailWindowSeconds: number;
}

/** How long a (email, address) pair's failures are remembered after its last attempt: 24 h. */
const PAIR_MEMORY_MS = 24 * 3600 * 1000;

/**
 * One (email, address) pair, atomically: refuses while the pair is in back-off (answers the ms left),
 * else counts this attempt as a failure up front (a log-in that succeeds clears the pair), so a burst of
 * parallel guesses cannot all pass before the first failure is written. After n counted attempts, with
 * n >= free, the next one waits min(max, base * 2^(n - free)) ms after the last.
 * KEYS[1] the pair's hash; ARGV now ms, free, base ms, max ms, memory ms.
 */
const PAIR_SCRIPT = `
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
local now = tonumber(ARGV[1])
local free = tonumber(ARGV[2])
if n >= free then
  local wait = math.min(tonumber(ARGV[4]), tonumber(ARGV[3]) * 2 ^ (n - free))
  if now < last + wait then return math.ceil(last + wait - now) end
end
redis.call('HSET', KEYS[1], 'n', n + 1, 'last', now)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 0
`;

type PairCommand = (
  key: string,
  now: number,
  free: number,
  base: number,
  max: number,
  memory: number,
) => Promise<number>;

function subject(v: string): string {
  return createHash("sha256").update(v, "utf8").digest("hex").slice(0, 32);
}

/**
 * Log-in throttle, checked before the password (TOO_MANY_REQUESTS with `retryAfterSeconds`):
 * - per (email, client address): exponential back-off after a few failures, so guessing one account's
 *   password from one address slows to a crawl while its owner, logging in from another address, is not
 *   held up at all;
 * - per client address over all emails (fixed window): one address spraying many accounts;
 * - per email over all addresses (fixed window, a high ceiling): guessing spread over many addresses.
 * A successful log-in clears its pair; the two windows count every attempt.
 */
export class LoginRateLimiter {
  private readonly pairCommand: PairCommand;

  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly opts: LoginThrottleOptions,
    /** Epoch ms; tests pass a fake clock (the back-off runs on it, the fixed windows on Redis TTLs). */
    private readonly now: () => number = Date.now,
  ) {
    const r = redis as unknown as Record<string, unknown>;
    if (typeof r.rgLoginPair !== "function") {
      redis.defineCommand("rgLoginPair", { numberOfKeys: 1, lua: PAIR_SCRIPT });
    }
    this.pairCommand = (r.rgLoginPair as PairCommand).bind(redis);
  }

  private pairKey(email: string, ip: string): string {
    return this.names.loginAttempts("pair", subject(`${email}\n${throttleSubject(ip)}`));
  }

  /** Counts an attempt of `email` from `ip`, or refuses it (TOO_MANY_REQUESTS) before any password check. */
  async hit(email: string, ip: string): Promise<void> {
    const o = this.opts;
    const waitMs = Number(
      await this.pairCommand(
        this.pairKey(email, ip),
        this.now(),
        o.freeFailures,
        o.backoffBaseMs,
        o.backoffMaxMs,
        PAIR_MEMORY_MS,
      ),
    );
    if (waitMs > 0) {
      throw tooManyRequests(
        "Too many failed log-ins for this email from this address; try again later",
        Math.max(1, Math.ceil(waitMs / 1000)),
      );
    }
    const windows: [string, number, number][] = [
      [
        this.names.loginAttempts("ip", subject(throttleSubject(ip))),
        o.maxAttemptsPerAddress,
        o.windowSeconds,
      ],
      [this.names.loginAttempts("email", subject(email)), o.maxAttemptsPerEmail, o.emailWindowSeconds],
    ];
    // One MULTI per counter: the keys hash to different Redis Cluster slots, and each counter only needs
    // its own INCR, first EXPIRE and PTTL to be atomic.
    const res = await Promise.all(
      windows.map(
        async ([k, , seconds]) =>
          (await this.redis.multi().incr(k).expire(k, seconds, "NX").pttl(k).exec()) ?? [],
      ),
    );
    for (let i = 0; i < windows.length; i++) {
      const [, max, seconds] = windows[i]!;
      const count = Number(res[i]![0]?.[1] ?? 0);
      const pttl = Number(res[i]![2]?.[1] ?? 0);
      if (count > max) {
        throw tooManyRequests(
          i === 0
            ? "Too many log-in attempts from this address; try again later"
            : "Too many log-in attempts for this email; try again later",
          Math.max(1, Math.ceil((pttl > 0 ? pttl : seconds * 1000) / 1000)),
        );
      }
    }
  }

  /** The right password: the pair's failures are forgotten. */
  async succeeded(email: string, ip: string): Promise<void> {
    await this.redis.del(this.pairKey(email, ip));
  }
}
