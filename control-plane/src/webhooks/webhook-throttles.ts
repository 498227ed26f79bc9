import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { tooManyRequests } from "../common/errors";

/**
 * `sendTestWebhook` per endpoint: a fixed-window counter in Redis (every control-plane instance counts
 * together). Each test send is an outbound request to an address the tenant chose; without a cap, a
 * script could make the worker a request generator.
 */
export class TestSendThrottle {
  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly maxPerEndpoint: number,
    private readonly windowSeconds: number,
  ) {}

  /** Counts one test send; throws TOO_MANY_REQUESTS (with `retryAfterSeconds`) past the limit. */
  async hit(endpointId: string): Promise<void> {
    const key = this.names.webhookTestSends(endpointId);
    const res =
      (await this.redis.multi().incr(key).expire(key, this.windowSeconds, "NX").pttl(key).exec()) ?? [];
    const count = Number(res[0]?.[1] ?? 0);
    const pttl = Number(res[2]?.[1] ?? 0);
    if (count > this.maxPerEndpoint) {
      throw tooManyRequests(
        `Too many test sends to this endpoint (limit ${this.maxPerEndpoint} per ${this.windowSeconds} s); try again later`,
        Math.max(1, Math.ceil((pttl > 0 ? pttl : this.windowSeconds * 1000) / 1000)),
      );
    }
  }
}

// Takes a slot for ARGV[2] (a delivery id) if the workspace holds fewer than ARGV[1]; a slot is a member
// of the sorted set scored with the Redis time (ms) it lapses at (ARGV[3] ms from now), so a worker that
// died mid-attempt frees its slot on its own. The same delivery taking its slot again (a re-run job) is
// one slot. Returns 1 when taken, 0 when the workspace is at its cap.
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not held and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

type AcquireCommand = (key: string, cap: number, member: string, leaseMs: number) => Promise<number>;

/**
 * Delivery slots per workspace, across every worker (Redis): at most `cap` of a workspace's deliveries
 * are attempted at once. A delivery that finds its workspace at the cap is put back in the queue for
 * `retryDelayMs` without using an attempt (webhook.processor.ts), so the worker's slots go to other
 * workspaces' deliveries: one tenant whose endpoints hang holds at most `cap` of them, each for at most
 * WEBHOOK_TIMEOUT_MS.
 */
export class WorkspaceDeliverySlots {
  private readonly acquireCommand: AcquireCommand;

  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly cap: number,
    /** How long a slot may be held before it lapses (longer than one attempt can take). */
    private readonly leaseMs: number,
  ) {
    const r = redis as unknown as Record<string, AcquireCommand>;
    if (typeof r.rgWebhookSlot !== "function") {
      redis.defineCommand("rgWebhookSlot", { numberOfKeys: 1, lua: ACQUIRE });
    }
    this.acquireCommand = (r.rgWebhookSlot as AcquireCommand).bind(redis);
  }

  async acquire(workspaceId: string, deliveryId: string): Promise<boolean> {
    const n = await this.acquireCommand(
      this.names.webhookInFlight(workspaceId),
      this.cap,
      deliveryId,
      this.leaseMs,
    );
    return Number(n) === 1;
  }

  async release(workspaceId: string, deliveryId: string): Promise<void> {
    await this.redis.zrem(this.names.webhookInFlight(workspaceId), deliveryId);
  }

  /** Wait before a deferred delivery is tried again: a quarter of an attempt's deadline, jittered. */
  static retryDelayMs(timeoutMs: number): number {
    const base = Math.min(5_000, Math.max(200, Math.floor(timeoutMs / 4)));
    return base + Math.floor(Math.random() * (base / 2));
  }
}
