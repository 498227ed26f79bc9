import { randomBytes } from "node:crypto";
import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { type Clock, systemClock } from "./clock";
import { type RateLimiter, type RateLimitResult, refuse, WINDOW_MS } from "./rate-limiter";
import { WindowCounts } from "./window-counts";

/**
 * Per-second limiter shared by several data-plane instances, without a Redis round trip per request
 * (the local-first design of Unkey and web3-proxy).
 *
 * Each instance decides locally on `othersKnown + localCount`, where `othersKnown` is what the other
 * instances had admitted for the identifier in this window as of the last reconciliation. Every
 * `syncIntervalMs` it writes its own absolute count for each identifier checked since the last sync into
 * one Redis hash per identifier per second (field = instance id; `max(old, new)`, so a retried or late
 * write is harmless) and reads back the others' sum and how many instances are admitting.
 *
 * Between two syncs an instance that shares an identifier with `peers - 1` others admits at most its
 * fair share of what is left: `floor((limit - othersKnown - localAtSync - unseen) / peers)`. `unseen`
 * stands for what the others have admitted since their own last sync (not yet visible in Redis): the
 * larger of `(peers - 1) * lastShare` (what this instance admitted during its previous sync interval, the
 * others' likely share under an even spread) and `othersGrowth` (how much the others' total grew at
 * recent syncs, halved at each sync that shows less: what they actually admit, whatever the spread and
 * however far apart their syncs are). Without it, staggered syncs overshoot by 25-40% when all instances
 * hammer one identifier; with `lastShare` alone, an instance on a light share of the load (or syncing
 * more often than a busy peer) saw the peer's admissions late and let 5-13% more through (simulated, and
 * once in the two-instance test over Redis Cluster). An instance alone on an identifier uses the whole
 * remainder, which keeps it exact. The first request after each sync may use up to the whole remainder
 * while the share is positive, so a batch larger than the share is not refused while capacity exists.
 *
 * The serving threads of one process are one instance: they decide on one shared count per identifier
 * (`counts`, a WindowCounts table given to every thread, exact within the process) and write it under
 * one `instanceId` (the process's). Each thread reconciles the identifiers it checked; writing the same
 * absolute count twice is harmless (`max(old, new)`). `localCount` below is that process count.
 *
 * Redis trouble never reaches the hot path. Fail-open (default): decide on local counts only (each
 * instance then enforces the full limit by itself). Fail-closed (`failClosedAfterMs` set): once Redis has
 * been unreachable that long, refuse with reason `store_unavailable`.
 */
export interface RedisRateLimiterOptions {
  /** Caller-owned connection; see `createLimitsRedis` for the recommended settings. */
  redis: RedisClient;
  names: RedisNames;
  clock?: Clock;
  /**
   * Identifies this instance's field in the window hashes; random by default. The serving threads of a
   * process pass the same one (with the same `counts`): the process is one instance.
   */
  instanceId?: string;
  /** The process's per-second counts (WindowCounts over the threads' shared table); this limiter's own by default. */
  counts?: WindowCounts;
  /** Reconciliation period. Shorter = closer to exact across instances, more Redis commands. */
  syncIntervalMs?: number;
  /** A sync round not answered within this long counts as a Redis failure. */
  syncTimeoutMs?: number;
  /** null (default) = fail-open; otherwise refuse once Redis has been unreachable this long. */
  failClosedAfterMs?: number | null;
  /** Lifetime of a window hash; covers clock skew between instances. */
  keyTtlMs?: number;
  /**
   * How often this instance announces itself in the instances hash (an instance silent for 6x this long
   * no longer counts). The live count is the peer guess for an identifier no instance has synced yet;
   * sync answers raise it sooner when a peer joins.
   */
  heartbeatIntervalMs?: number;
  logger?: Logger;
}

interface Entry {
  /** Handle of the instance's count of request objects admitted in the window (`counts.load(slot)`). */
  readonly slot: number;
  /** Request objects the other instances admitted in the window, as of the last sync. */
  othersCount: number;
  /** `localCount` when `othersCount` was last refreshed (0 at window start). */
  localAtSync: number;
  /** Request objects this instance admitted during its previous sync interval. */
  lastShare: number;
  /** How much the others' total grew at the last sync, or half the previous figure when that is more. */
  othersGrowth: number;
  /** Instances admitting for this identifier, this one included: the larger of the two below. */
  peers: number;
  /** Most instances seen writing this identifier's hash in this window (this one included). */
  peersSeen: number;
  /**
   * Instances seen in the previous window, or live in the cluster: early in a window the peers have not
   * written yet, and forgetting them would hand this instance the whole remainder.
   */
  peersBefore: number;
  /** Checked since the last sync: include in the next round. */
  dirty: boolean;
}

// Writes this instance's absolute count (never lowering it) and returns {sum of the others, their number}.
const SYNC_SCRIPT = `
local mine = tonumber(ARGV[2])
if mine > 0 then
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
  if mine > cur then redis.call('HSET', KEYS[1], ARGV[1], mine) end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
local all = redis.call('HGETALL', KEYS[1])
local sum, n = 0, 0
for i = 1, #all, 2 do
  if all[i] ~= ARGV[1] then sum = sum + tonumber(all[i + 1]); n = n + 1 end
end
return {sum, n}
`;

// Heartbeat in the instances hash (Redis server time, so instance clocks do not matter); drops instances
// silent for longer than ARGV[2] ms and returns how many are live.
const HEARTBEAT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], now)
redis.call('PEXPIRE', KEYS[1], stale)
local all = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 1, #all, 2 do
  if now - tonumber(all[i + 1]) <= stale then n = n + 1 else redis.call('HDEL', KEYS[1], all[i]) end
end
return n
`;

type HeartbeatCommand = (key: string, instanceId: string, staleMs: number) => Promise<number>;

type SyncCommand = (
  key: string,
  instanceId: string,
  count: number,
  ttlMs: number,
) => Promise<[number, number]>;

export class RedisReconciledRateLimiter implements RateLimiter {
  readonly instanceId: string;
  private readonly redis: RedisClient;
  private readonly names: RedisNames;
  private readonly clock: Clock;
  private readonly syncIntervalMs: number;
  private readonly syncTimeoutMs: number;
  private readonly failClosedAfterMs: number | null;
  private readonly keyTtlMs: number;
  private readonly logger?: Logger;
  private readonly syncCommand: SyncCommand;
  private readonly heartbeatCommand: HeartbeatCommand;
  private readonly heartbeatIntervalMs: number;
  private readonly counts: WindowCounts;
  private lastHeartbeatMs = Number.NEGATIVE_INFINITY;
  /**
   * Live instances: the peer guess for an identifier not seen before. Set by the heartbeat, and raised
   * between heartbeats by any sync answer that shows more instances writing one identifier.
   */
  private instances = 1;

  private windowIndex = -1;
  private current = new Map<string, Entry>();
  private previous = new Map<string, Entry>();

  private healthy = true;
  private unhealthySinceMs: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private readonly onClose = () => this.markUnhealthy();
  private readonly onReady = () => {
    // The connection is back; the next sync round confirms it (and fail-closed stops refusing now).
    this.healthy = true;
    this.unhealthySinceMs = undefined;
    this.lastHeartbeatMs = Number.NEGATIVE_INFINITY;
  };

  constructor(opts: RedisRateLimiterOptions) {
    this.redis = opts.redis;
    this.names = opts.names;
    this.clock = opts.clock ?? systemClock;
    this.instanceId = opts.instanceId ?? randomBytes(6).toString("hex");
    this.syncIntervalMs = opts.syncIntervalMs ?? 25;
    this.syncTimeoutMs = opts.syncTimeoutMs ?? 250;
    this.failClosedAfterMs = opts.failClosedAfterMs ?? null;
    this.keyTtlMs = opts.keyTtlMs ?? 5_000;
    this.logger = opts.logger;
    const r = this.redis as unknown as Record<string, SyncCommand>;
    if (typeof r.rgRateLimitSync !== "function") {
      this.redis.defineCommand("rgRateLimitSync", { numberOfKeys: 1, lua: SYNC_SCRIPT });
    }
    this.syncCommand = (r.rgRateLimitSync as SyncCommand).bind(this.redis);
    if (typeof r.rgRateLimitHeartbeat !== "function") {
      this.redis.defineCommand("rgRateLimitHeartbeat", { numberOfKeys: 1, lua: HEARTBEAT_SCRIPT });
    }
    this.heartbeatCommand = (r.rgRateLimitHeartbeat as unknown as HeartbeatCommand).bind(this.redis);
    this.heartbeatIntervalMs = opts.heartbeatIntervalMs ?? 500;
    this.counts = opts.counts ?? new WindowCounts();
  }

  /** Starts the reconciliation loop. The Redis connection is the caller's to open and close. */
  start(): void {
    if (this.timer !== undefined) return;
    this.redis.on("close", this.onClose);
    this.redis.on("ready", this.onReady);
    this.timer = setInterval(() => {
      if (this.round === undefined) void this.syncNow();
    }, this.syncIntervalMs);
    this.timer.unref();
    void this.syncNow();
  }

  /** Stops the loop, waits for a round in flight, and leaves the instances hash (best effort). */
  async stop(): Promise<void> {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.redis.off("close", this.onClose);
    this.redis.off("ready", this.onReady);
    await this.round;
    if (this.redis.status === "ready") {
      await this.redis.hdel(this.names.rateLimitInstances(), this.instanceId).catch(() => undefined);
    }
  }

  /** Live data-plane instances as last read from Redis (1 until then). */
  get liveInstances(): number {
    return this.instances;
  }

  /** True while the last sync succeeded; false while Redis is unreachable (decisions are local-only). */
  get redisHealthy(): boolean {
    return this.healthy;
  }

  /** Identifiers holding state in the current window. */
  get size(): number {
    return this.current.size;
  }

  check(identifier: string, cost: number, limitPerSecond: number, commit = true): RateLimitResult {
    const nowMs = this.clock.now();
    this.roll(nowMs);
    const windowEndMs = (this.windowIndex + 1) * WINDOW_MS;
    if (!(limitPerSecond < Number.POSITIVE_INFINITY)) {
      return {
        allowed: true,
        limit: limitPerSecond,
        remaining: limitPerSecond,
        retryAfterMs: 0,
        resetAtMs: 0,
        reason: undefined,
      };
    }
    if (
      this.failClosedAfterMs !== null &&
      this.unhealthySinceMs !== undefined &&
      nowMs - this.unhealthySinceMs >= this.failClosedAfterMs
    ) {
      return refuse(limitPerSecond, 0, windowEndMs, nowMs, "store_unavailable");
    }
    let e = this.current.get(identifier);
    if (e === undefined) {
      e = {
        slot: this.counts.slot(identifier, this.windowIndex),
        othersCount: 0,
        localAtSync: 0,
        lastShare: 0,
        othersGrowth: 0,
        peers: 1,
        peersSeen: 1,
        // Every live instance may be about to serve it: assuming so costs an instance that is in fact
        // alone almost nothing (it still reaches the limit within the window, simulated), while
        // assuming too few lets a burst at the window start through on every instance.
        peersBefore: Math.max(this.previous.get(identifier)?.peersSeen ?? 1, this.instances),
        dirty: true,
      };
      e.peers = e.peersBefore;
      this.current.set(identifier, e);
    }
    e.dirty = true;
    const counts = this.counts;
    let localCount = counts.load(e.slot);
    let used = e.othersCount + localCount;
    if (cost > limitPerSecond) return refuse(limitPerSecond, used, windowEndMs, nowMs, "batch_exceeds_limit");
    for (;;) {
      if (used + cost > limitPerSecond) return refuse(limitPerSecond, used, windowEndMs, nowMs);
      const sinceSync = localCount - e.localAtSync;
      if (this.healthy && e.peers > 1) {
        const unseen = Math.max((e.peers - 1) * e.lastShare, e.othersGrowth);
        const share = Math.floor((limitPerSecond - e.othersCount - e.localAtSync - unseen) / e.peers);
        // The first request after a sync may take more than the share (a batch), while there is one.
        if (sinceSync + cost > share && !(sinceSync === 0 && share > 0)) {
          return refuse(limitPerSecond, used, windowEndMs, nowMs);
        }
      }
      if (cost <= 0 || !commit) break;
      // Another thread of the process may have admitted since the load: decide again on what it left.
      const found = counts.compareExchange(e.slot, localCount, localCount + cost);
      if (found === localCount) break;
      localCount = found;
      used = e.othersCount + localCount;
    }
    return {
      allowed: true,
      limit: limitPerSecond,
      remaining: limitPerSecond - used - cost,
      retryAfterMs: 0,
      resetAtMs: windowEndMs,
      reason: undefined,
    };
  }

  refund(identifier: string, cost: number): void {
    if (cost > 0) this.counts.refund(identifier, this.windowIndex, cost);
  }

  /** One reconciliation round now (the loop calls this; tests call it to step deterministically). */
  syncNow(): Promise<void> {
    if (this.round !== undefined) return this.round;
    this.round = this.doRound().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  private roll(nowMs: number): void {
    const index = Math.floor(nowMs / WINDOW_MS);
    // A clock stepping backwards stays in the newest window seen.
    if (index <= this.windowIndex) return;
    this.previous = index === this.windowIndex + 1 ? this.current : new Map();
    this.current = new Map();
    this.windowIndex = index;
  }

  private async doRound(): Promise<void> {
    const nowMs = this.clock.now();
    this.roll(nowMs);
    if (nowMs - this.lastHeartbeatMs >= this.heartbeatIntervalMs) {
      this.lastHeartbeatMs = nowMs;
      this.heartbeatCommand(
        this.names.rateLimitInstances(),
        this.instanceId,
        this.heartbeatIntervalMs * 6,
      ).then(
        (n) => {
          this.instances = Math.max(1, n);
        },
        () => {
          // Counted as a failure by the sync round; the guess stays as it was.
        },
      );
    }
    const windowIndex = this.windowIndex;
    const table = this.current;
    const batch: Array<[Entry, Promise<[number, number]>]> = [];
    for (const [identifier, e] of table) {
      if (!e.dirty) continue;
      e.dirty = false;
      const key = this.names.rateLimitWindow(identifier, windowIndex);
      batch.push([e, this.syncCommand(key, this.instanceId, this.counts.load(e.slot), this.keyTtlMs)]);
    }
    if (batch.length === 0) return;
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timeout = setTimeout(() => resolve("timeout"), this.syncTimeoutMs);
    });
    const settled = await Promise.race([Promise.allSettled(batch.map(([, p]) => p)), timedOut]);
    clearTimeout(timeout);
    if (settled === "timeout") {
      for (const [e] of batch) e.dirty = true;
      this.markUnhealthy("sync timed out");
      return;
    }
    let failure: string | undefined;
    for (let i = 0; i < batch.length; i++) {
      const [e] = batch[i]!;
      const s = settled[i]!;
      if (s.status === "rejected") {
        e.dirty = true;
        failure = (s.reason as Error)?.message ?? String(s.reason);
        continue;
      }
      // Answers for a window that has ended are of no use: its entries are gone.
      if (this.current !== table) continue;
      const [othersSum, othersN] = s.value;
      e.othersGrowth = Math.max(othersSum - e.othersCount, Math.floor(e.othersGrowth / 2));
      if (othersSum > e.othersCount) e.othersCount = othersSum;
      const localCount = this.counts.load(e.slot);
      e.lastShare = localCount - e.localAtSync;
      e.localAtSync = localCount;
      if (othersN + 1 > e.peersSeen) e.peersSeen = othersN + 1;
      e.peers = Math.max(e.peersSeen, e.peersBefore);
      // Every instance writing this window's hash is live: a peer that joined shows here at its first
      // sync, up to a heartbeat interval before the heartbeat would tell (only the heartbeat lowers it).
      if (othersN + 1 > this.instances) this.instances = othersN + 1;
    }
    if (failure !== undefined) {
      this.markUnhealthy(failure);
    } else {
      this.healthy = true;
      this.unhealthySinceMs = undefined;
    }
  }

  private markUnhealthy(why = "connection closed"): void {
    if (this.healthy) this.logger?.warn({ err: why }, "rate limiter: redis unreachable, limiting locally");
    this.healthy = false;
    this.unhealthySinceMs ??= this.clock.now();
  }
}
