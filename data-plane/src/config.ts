import { z } from "zod";
import { commonEnvShape, env, parseEnv } from "../../shared/src/config/env";
import { limitsEnvShape } from "./ratelimit/limits";
import { usageRecorderEnvShape } from "./usage/recorder";

/**
 * Data-plane configuration, parsed once from the environment. Every duration is in milliseconds and every
 * size in bytes; the unit is part of the variable name.
 */
export const dataPlaneEnvShape = {
  ...commonEnvShape,
  DATA_PLANE_PORT: env.port(8080),
  /** Interface the HTTP server binds to. */
  DATA_PLANE_HOST: z.string().default("0.0.0.0"),
  /** Comma-separated CIDRs (or single addresses) of reverse proxies whose X-Forwarded-For is trusted. */
  TRUSTED_PROXIES: env.list(""),
  /** Request bodies above this size are refused with 413 as soon as the cap is crossed. */
  MAX_BODY_BYTES: env.int(1024 * 1024, 2, 64 * 1024 * 1024),
  /** A request whose body has not fully arrived after this long is closed (slow-body defence). */
  BODY_TIMEOUT_MS: env.int(10_000, 100, 600_000),
  /** Whole upstream exchange (headers and body) per attempt. */
  UPSTREAM_TIMEOUT_MS: env.int(10_000, 50, 600_000),
  /** Keep-alive connections per upstream node. */
  UPSTREAM_CONNECTIONS: env.int(64, 1, 4096),
  /** Attempts per request across different upstreams (first try + failovers). */
  UPSTREAM_MAX_ATTEMPTS: env.int(3, 1, 10),
  /**
   * Single calls arriving in the same event-loop turn go upstream as one JSON-RPC batch of up to this
   * many (large-answer methods and sends excepted). 1 disables coalescing.
   */
  UPSTREAM_COALESCE_MAX: env.int(20, 1, 1000),
  /** Positive key-record cache lifetime (events invalidate sooner). */
  KEY_CACHE_TTL_MS: env.int(60_000, 100, 86_400_000),
  KEY_CACHE_MAX_ENTRIES: env.int(100_000, 10, 10_000_000),
  /** How long an unknown key is remembered as unknown (cleared at once by key.upsert). */
  NEGATIVE_KEY_CACHE_TTL_MS: env.int(2_000, 0, 60_000),
  /** Redis command timeout on the request path (key lookups on a cache miss). */
  REDIS_COMMAND_TIMEOUT_MS: env.int(1_000, 50, 60_000),
  /** Response cache bound (approximate bytes of cached JSON text). 0 disables the cache. */
  CACHE_MAX_BYTES: env.int(64 * 1024 * 1024, 0, 16 * 1024 * 1024 * 1024),
  /**
   * When an answer enters the cache: `second` (default) only when its key was requested before, recently,
   * so one-off requests never take cache memory (data-plane/src/cache/doorkeeper.ts); `first` stores every
   * cacheable answer at once.
   */
  CACHE_ADMISSION: z.enum(["second", "first"]).default("second"),
  /** Upper bound on the life of a per-block cache entry, should head tracking stall. */
  CACHE_PER_BLOCK_TTL_MS: env.int(2_000, 10, 600_000),
  HEALTH_CHECK_INTERVAL_MS: env.int(2_000, 50, 600_000),
  /** An upstream further than this many blocks behind the best head is not selected. */
  HEALTH_MAX_LAG_BLOCKS: env.int(5, 0, 1_000_000),
  /** Consecutive failures that open an upstream's circuit breaker. */
  BREAKER_FAILURE_THRESHOLD: env.int(3, 1, 1000),
  /** How long an open breaker stays open before one half-open probe is let through. */
  BREAKER_COOLDOWN_MS: env.int(5_000, 10, 600_000),
  /** Per client WebSocket: live subscriptions (over the cap: a -32005 answer, socket stays open). */
  WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: env.int(1000, 1, 1_000_000),
  /** Per client WebSocket: request objects being answered at once (over the cap: -32005 answers). */
  WS_MAX_IN_FLIGHT_PER_CONNECTION: env.int(100, 1, 100_000),
  /** A client whose unsent backlog passes this is closed with 4008 "slow consumer". */
  WS_MAX_BUFFERED_BYTES: env.int(1024 * 1024, 1024, 1024 * 1024 * 1024),
  /**
   * Client sockets silent this long are closed; the server pings idle sockets before that (a live client
   * answers with a pong). 0 = never; otherwise 8..960 (uWS's range, 4 s granularity).
   */
  WS_IDLE_TIMEOUT_S: env
    .int(120, 0, 960)
    .refine((v) => v === 0 || v >= 8, { error: "expected 0 or an integer 8..960" }),
  /** After a close frame (slow consumer, revoked key, shutdown), a socket still open this long is dropped. */
  WS_CLOSE_GRACE_MS: env.int(10_000, 0, 600_000),
  /** Persistent upstream WebSockets per network, shared by every client subscription. */
  UPSTREAM_WS_CONNECTIONS: env.int(2, 1, 64),
  /** Ceiling of the reconnect backoff of an upstream WebSocket. */
  UPSTREAM_WS_RECONNECT_MAX_MS: env.int(5_000, 50, 600_000),
  /** Upstream WebSockets are pinged this often; no pong by the next ping drops and replaces the socket. */
  UPSTREAM_WS_PING_INTERVAL_MS: env.int(15_000, 100, 600_000),
  /** On SIGTERM, how long in-flight requests may take to finish. */
  SHUTDOWN_DRAIN_MS: env.int(10_000, 0, 600_000),
  /**
   * V8's old-generation growth between full GCs, in percent of what the last one kept; sets a fixed
   * factor in place of V8's 1.1-4x (0 = V8's own heuristics). See memory/heap-tuning.ts.
   */
  V8_HEAP_GROWING_PERCENT: env.int(25, 0, 100),
  /** Per-second rate limits and daily/monthly quotas (RATE_LIMIT_*, PUBLIC_RATE_LIMIT_PER_SECOND, QUOTA_*). */
  ...limitsEnvShape,
  /** Usage recording: `redis` aggregates per minute and XADDs to the usage stream; `off` records nothing. */
  USAGE_MODE: z.enum(["redis", "off"]).default("redis"),
  /** USAGE_FLUSH_INTERVAL_MS, USAGE_MAX_PENDING_ROWS, USAGE_STREAM_MAXLEN, ... (see usage/recorder.ts). */
  ...usageRecorderEnvShape,
  /**
   * Largest WebSocket message the server reads in full (uWS's maxPayloadLength; the larger of this and
   * MAX_BODY_BYTES). A message above MAX_BODY_BYTES but within this is read, then answered with close
   * 1009 "message too big"; a larger one is refused at its frame header by uWS, which drops the TCP
   * connection without a close frame (the client sees 1006). Memory: a sender can make the server hold
   * up to this many bytes per socket while its frame arrives (measured: 20 sockets each 1 byte short of a
   * 16 MiB frame held 16.0 MiB each, released at the 1009 close). MAX_BODY_BYTES here = nothing above it
   * is ever buffered, and every larger message gets 1006.
   */
  WS_MAX_FRAME_BYTES: env.int(16 * 1024 * 1024, 2, 256 * 1024 * 1024),
};

export const DataPlaneEnvSchema = z.object(dataPlaneEnvShape);
export type DataPlaneConfig = z.infer<typeof DataPlaneEnvSchema>;

export function loadDataPlaneConfig(source: NodeJS.ProcessEnv = process.env): DataPlaneConfig {
  return parseEnv(DataPlaneEnvSchema, source);
}
