import { availableParallelism } from "node:os";
import { z } from "zod";
import { ConfigError, commonEnvShape, env, parseEnv } from "../../shared/src/config/env";
import { limitsEnvShape } from "./ratelimit/limits";
import { requestLogEnvShape } from "./requestlog/recorder";
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
  /**
   * Prometheus `GET /metrics` listener of the process (shared/src/metrics/server.ts), apart from the public port: its
   * series name every network, upstream and dedicated node. Loopback by default; a scraper elsewhere needs
   * METRICS_HOST set (0.0.0.0 in the container images' deployments). 0 = a free port.
   */
  METRICS_PORT: env.port(9464),
  METRICS_HOST: z.string().default("127.0.0.1"),
  /**
   * Threads serving requests, each a whole data plane listening on the same port (threads/supervisor.ts).
   * Unset = the CPUs this process may run on (`os.availableParallelism()`: its affinity mask, not a
   * container's CPU quota, so set it to the CPU limit under one). 1 = no worker thread at all.
   */
  DATA_PLANE_THREADS: z.coerce
    .number({ error: "expected an integer 1..1024" })
    .int({ error: "expected an integer 1..1024" })
    .min(1, { error: "expected an integer 1..1024" })
    .max(1024, { error: "expected an integer 1..1024" })
    .optional(),
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
  /**
   * Response cache bound of the process (approximate bytes of cached JSON text): each serving thread caches
   * up to its share (threads/worker.ts). 0 disables the cache.
   */
  CACHE_MAX_BYTES: env.int(64 * 1024 * 1024, 0, 16 * 1024 * 1024 * 1024),
  /**
   * When an answer enters the cache: `second` (default) only when its key was requested before, recently,
   * so one-off requests never take cache memory (data-plane/src/cache/doorkeeper.ts); `first` stores every
   * cacheable answer at once.
   */
  CACHE_ADMISSION: z.enum(["second", "first"]).default("second"),
  /** Upper bound on the life of a per-block cache entry, should head tracking stall. */
  CACHE_PER_BLOCK_TTL_MS: env.int(2_000, 10, 600_000),
  /**
   * Finality-aware cache: each health round also reads every node's finalized head (EVM `finalized` tag,
   * Substrate chain_getFinalizedHead) and head hash; answers about blocks given by number at or below the
   * network's finalized head are kept as permanent, and a reorg the health checks see drops the per-block
   * entries it made stale (upstream/chain-watch.ts). false = per-block caching only, no extra polls.
   */
  CACHE_FINALITY_ENABLED: env.bool(true),
  HEALTH_CHECK_INTERVAL_MS: env.int(2_000, 50, 600_000),
  /**
   * How often each network's served head (the head eth_blockNumber and `latest` blocks are answered at,
   * never going back) is shared with the other threads and instances through Redis; 0 = not shared (each
   * thread keeps its own). See upstream/served-head-share.ts.
   */
  SERVED_HEAD_SHARE_INTERVAL_MS: env.int(500, 0, 600_000),
  /**
   * How often this instance writes its upstream health record to Redis for the operator console
   * (RedisNames.upstreamHealth; TTL 3 intervals). 0 = never.
   */
  HEALTH_PUBLISH_INTERVAL_MS: env.int(5_000, 0, 600_000),
  /**
   * How often each upstream not declared ARCHIVE is probed for the oldest block whose state it serves
   * (a few eth_getBalance / state_getStorage reads at old blocks); new upstreams are probed at once.
   * 0 = never: upstreams not declared ARCHIVE stay "not known" (ranked after known ones, never refused).
   */
  UPSTREAM_STATE_PROBE_INTERVAL_MS: env.int(60_000, 0, 86_400_000),
  /** An upstream further than this many blocks behind the best head is not selected. */
  HEALTH_MAX_LAG_BLOCKS: env.int(5, 0, 1_000_000),
  /**
   * A head more than this many blocks above every other upstream's is not believed: the network head is
   * the highest head another upstream confirms (with two upstreams this far apart, the lower one). See
   * upstream/head.ts. Set above how far a healthy node of the fastest chain can fall behind.
   */
  HEAD_OUTLIER_BLOCKS: env.int(1000, 1, 1_000_000_000),
  /**
   * Hedged reads (upstream/hedge.ts): an idempotent read not answered after the best healthy upstream's
   * p95 latency (clamped to HEDGE_MIN_DELAY_MS..HEDGE_MAX_DELAY_MS) is also
   * sent to another healthy upstream; the first answer wins, the other exchange is cancelled. Never sends,
   * filters or heavy calls.
   */
  HEDGE_ENABLED: env.bool(true),
  /** Earliest a hedge copy goes out, whatever the p95 (must not be above HEDGE_MAX_DELAY_MS). */
  HEDGE_MIN_DELAY_MS: env.int(20, 0, 600_000),
  /** Latest a hedge copy goes out (and the delay while no p95 is known yet). */
  HEDGE_MAX_DELAY_MS: env.int(1_000, 1, 600_000),
  /**
   * Hedge copies per 100 hedgeable upstream exchanges of a network, at most, after a burst of 10 (a slow
   * network is not doubled); 0 = none.
   */
  HEDGE_MAX_PERCENT: env.int(20, 0, 100),
  /**
   * Consecutive failures that open an upstream's circuit breaker: connection errors, 5xx, invalid answers,
   * failed health probes. Client calls timing out and 429s do not count (see upstream/upstream.ts).
   */
  BREAKER_FAILURE_THRESHOLD: env.int(3, 1, 1000),
  /** How long an open breaker stays open before one half-open probe is let through. */
  BREAKER_COOLDOWN_MS: env.int(5_000, 10, 600_000),
  /** Per client WebSocket: live subscriptions (over the cap: a -32005 answer, socket stays open). */
  WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: env.int(100, 1, 1_000_000),
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
  /**
   * Most bytes buffered from one upstream or dedicated-node answer (HTTP body or WebSocket message); a larger
   * answer fails the call with upstream_response_too_large and its connection is closed. 32 MiB.
   */
  UPSTREAM_MAX_RESPONSE_BYTES: env.int(32 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
  /**
   * Most bytes buffered from all upstream and dedicated-node HTTP answers in flight together (this process,
   * every thread: SharedBufferBudget);
   * the call whose next chunk would pass it fails with upstream_buffer_full (503) and its connection is
   * closed. Bounds what MAX_IN_FLIGHT_PER_KEY x UPSTREAM_MAX_RESPONSE_BYTES would allow. 256 MiB.
   */
  UPSTREAM_BUFFER_BUDGET_BYTES: env.int(256 * 1024 * 1024, 1024, 64 * 1024 * 1024 * 1024),
  /** On SIGTERM, how long in-flight requests may take to finish. */
  SHUTDOWN_DRAIN_MS: env.int(10_000, 0, 600_000),
  /**
   * V8's old-generation growth between full GCs, in percent of what the last one kept; sets a fixed
   * factor in place of V8's 1.1-4x (0 = V8's own heuristics). See memory/heap-tuning.ts.
   */
  V8_HEAP_GROWING_PERCENT: env.int(25, 0, 100),
  /** V8's allocation-site pretenuring (off by default: see memory/heap-tuning.ts). */
  V8_ALLOCATION_SITE_PRETENURING: env.bool(false),
  /** Per-second rate limits and daily/monthly quotas (RATE_LIMIT_*, PUBLIC_RATE_LIMIT_PER_SECOND, QUOTA_*). */
  ...limitsEnvShape,
  /**
   * Upstream calls (request objects) one app key, or one client IP on the public endpoint, may have in
   * flight at once, HTTP and WebSocket together, per serving thread; beyond it: 429 concurrency_limit.
   * 0 = no cap.
   */
  MAX_IN_FLIGHT_PER_KEY: env.int(200, 0, 1_000_000),
  /**
   * Of those, heavy calls (eth_getLogs, debug_*, trace_*, big state_* reads): one tenant cannot take the
   * whole heavy share of the nodes' connections (UPSTREAM_HEAVY_SHARE_PERCENT). 0 = no separate cap.
   */
  MAX_HEAVY_IN_FLIGHT_PER_KEY: env.int(16, 0, 1_000_000),
  /**
   * Filters (eth_newFilter, eth_newBlockFilter, eth_newPendingTransactionFilter) the gateway keeps per app
   * (public endpoint: per client IP) at once on shared networks (data-plane/src/filters); past it,
   * filter_limit. Expired and uninstalled filters do not count.
   */
  MAX_FILTERS_PER_APP: env.int(100, 1, 1_000_000),
  /** A filter not polled for this long is gone (geth: 5 minutes), answered `filter not found`. */
  FILTER_TTL_MS: env.int(300_000, 1_000, 86_400_000),
  /**
   * Blocks one eth_getFilterChanges on a block filter covers at most (the oldest first; the next poll
   * goes on from there): each is one eth_getBlockByNumber upstream. Log filters cover at most the
   * network's maxLogsBlockRange per poll.
   */
  FILTER_MAX_BLOCKS_PER_POLL: env.int(100, 1, 10_000),
  /**
   * eth_sendRawTransaction / author_submitExtrinsic on a shared network go to this many of its healthy
   * upstreams at once (the first acceptance answers); 0 = all of them.
   */
  SEND_BROADCAST_UPSTREAMS: env.int(0, 0, 1_000),
  /**
   * Share of UPSTREAM_CONNECTIONS one upstream gives heavy calls (eth_getLogs, debug_*, trace_*, big
   * state_* reads) at once; beyond it on every node: 503 upstream_busy. Keeps the other connections for
   * ordinary calls whatever the heavy load. 100 = no reserve.
   */
  UPSTREAM_HEAVY_SHARE_PERCENT: env.int(50, 1, 100),
  /**
   * Sub-calls of one split eth_getLogs (a range longer than the network's logsChunkBlocks) in flight at
   * once, spread over the network's upstreams; each also takes a heavy-call slot on its node.
   */
  LOGS_SPLIT_CONCURRENCY: env.int(8, 1, 256),
  /** Timeout of a health probe (eth_blockNumber / chain_getHeader); a probe's failures open breakers. */
  HEALTH_PROBE_TIMEOUT_MS: env.int(2_000, 50, 600_000),
  /** How long an upstream that answered 429 without a usable Retry-After is sent nothing. */
  UPSTREAM_BACKOFF_DEFAULT_MS: env.int(1_000, 10, 600_000),
  /** Ceiling on an upstream's 429 back-off, whatever its Retry-After says. */
  UPSTREAM_BACKOFF_MAX_MS: env.int(30_000, 10, 3_600_000),
  /** Usage recording: `redis` aggregates per minute and XADDs to the usage stream; `off` records nothing. */
  USAGE_MODE: z.enum(["redis", "off"]).default("redis"),
  /** USAGE_FLUSH_INTERVAL_MS, USAGE_MAX_PENDING_ROWS, USAGE_STREAM_MAXLEN, ... (see usage/recorder.ts). */
  ...usageRecorderEnvShape,
  /** REQUEST_LOG_ENABLED, REQUEST_LOG_SAMPLE_PERCENT, ... (see requestlog/recorder.ts). */
  ...requestLogEnvShape,
  /**
   * Open client WebSockets per app (per node for a dedicated node's key), counted per serving thread;
   * past it the upgrade is refused with 429 `ws_connection_limit`.
   */
  WS_MAX_CONNECTIONS_PER_KEY: env.int(1000, 1, 10_000_000),
  /**
   * Open client WebSockets per client address (IPv6 per /64), keyed and public together, per thread;
   * past it the upgrade is refused with 429 `ws_ip_connection_limit`. Sized for a NAT or an office.
   */
  WS_MAX_CONNECTIONS_PER_IP: env.int(500, 1, 10_000_000),
  /**
   * Distinct upstream subscriptions a workspace (a client address on the public endpoint) may hold a
   * share of on one network's shared nodes; a subscribe that would open another is refused with 429
   * `ws_upstream_subscription_limit`. Joining a subscription that already exists upstream is not refused.
   */
  WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE: env.int(200, 1, 10_000_000),
  /**
   * Verdicts on app JWTs kept in process (auth/jwt.ts): a verified token until its `exp`, a refused one
   * for 60 s, least recently used first out past this many.
   */
  JWT_CACHE_MAX_ENTRIES: env.int(100_000, 10, 10_000_000),
  /**
   * Unknown API keys one client address (IPv6 per /64) may present per KEY_LOOKUP_WINDOW_MS before keys
   * that are not cached are refused with 429 `key_lookup_throttled` without asking Redis (auth/
   * lookup-throttle.ts; one count for the whole process, all threads). 0 = no throttle.
   */
  KEY_LOOKUP_MAX_FAILURES: env.int(20, 0, 1_000_000),
  /** The window of KEY_LOOKUP_MAX_FAILURES; a throttled address may try again when it ends (Retry-After). */
  KEY_LOOKUP_WINDOW_MS: env.int(60_000, 100, 3_600_000),
  /** Clock skew allowed on a JWT's `nbf` (seconds); `exp` is checked without leeway. */
  JWT_NBF_LEEWAY_S: env.int(30, 0, 3_600),
  /**
   * Failed JWT verifications (auth/jwt-throttle.ts) counted in fixed windows of this length; past either
   * maximum below, tokens that would need a signature check get 429 `jwt_throttled` until the window ends.
   * Per process thread; tokens already verified are never throttled.
   */
  JWT_FAILURE_WINDOW_MS: env.int(10_000, 100, 3_600_000),
  /** Failed JWT verifications per client address (IPv6 per /64) per window, all apps together. */
  JWT_MAX_FAILURES_PER_ADDRESS: env.int(20, 1, 1_000_000),
  /** Failed JWT verifications per app per window, all addresses together. */
  JWT_MAX_FAILURES_PER_APP: env.int(200, 1, 1_000_000),
  /** Namespaces shared nodes serve beyond the built-in allow-list (comma-separated, e.g. `bor,zks`). */
  SHARED_NODE_EXTRA_NAMESPACES: env.list(""),
  /**
   * On SIGTERM, after the drain: how long requests still arriving on open keep-alive connections are
   * refused (503 `shutting_down`, counted, `Connection: close`) before every connection is closed and
   * usage is flushed for the last time. 0 = close at once after the drain.
   */
  SHUTDOWN_LINGER_MS: env.int(500, 0, 60_000),
  /**
   * Largest WebSocket message the server reads in full (uWS's maxPayloadLength; the larger of this and
   * MAX_BODY_BYTES). A message above MAX_BODY_BYTES but within this is read, then answered with close
   * 1009 "message too big"; a larger one is refused at its frame header by uWS, which drops the TCP
   * connection without a close frame (the client sees 1006). Memory: a sender can make the server hold
   * up to this many bytes per socket while its frame arrives (released at the 1009 close; see
   * docs/benchmarks.md). The 2 MiB default bounds that to 2 MiB
   * per socket (x WS_MAX_CONNECTIONS_PER_IP per client address); MAX_BODY_BYTES here = nothing above it is
   * ever buffered, and every larger message gets 1006.
   */
  WS_MAX_FRAME_BYTES: env.int(2 * 1024 * 1024, 2, 256 * 1024 * 1024),
};

export const DataPlaneEnvSchema = z.object(dataPlaneEnvShape);
export type DataPlaneConfig = z.infer<typeof DataPlaneEnvSchema>;

/**
 * Longest a `close()` can take with this configuration: the drain, the linger, the second linger given to
 * requests the drain ran out on (see HttpServer.finish), the final quota and usage flushes (in parallel,
 * each retried up to its timeout), plus 2 s for closing upstream pools and Redis connections. Supervisors
 * must wait at least this long before killing the process (compose `stop_grace_period`, `npm start`), or
 * the last usage flush is lost; the process's own forced exit after an uncaught exception uses it too.
 */
export function shutdownBudgetMs(
  config: Pick<
    DataPlaneConfig,
    "SHUTDOWN_DRAIN_MS" | "SHUTDOWN_LINGER_MS" | "USAGE_CLOSE_TIMEOUT_MS" | "QUOTA_CLOSE_TIMEOUT_MS"
  >,
): number {
  return (
    config.SHUTDOWN_DRAIN_MS +
    2 * config.SHUTDOWN_LINGER_MS +
    Math.max(config.USAGE_CLOSE_TIMEOUT_MS, config.QUOTA_CLOSE_TIMEOUT_MS) +
    2_000
  );
}

/** How many serving threads this configuration asks for (DATA_PLANE_THREADS, or the CPUs available). */
export function dataPlaneThreads(config: Pick<DataPlaneConfig, "DATA_PLANE_THREADS">): number {
  return config.DATA_PLANE_THREADS ?? Math.max(1, availableParallelism());
}

export function loadDataPlaneConfig(source: NodeJS.ProcessEnv = process.env): DataPlaneConfig {
  const config = parseEnv(DataPlaneEnvSchema, source);
  if (config.HEDGE_MIN_DELAY_MS > config.HEDGE_MAX_DELAY_MS) {
    throw new ConfigError(
      `Invalid configuration: HEDGE_MIN_DELAY_MS (${config.HEDGE_MIN_DELAY_MS}) is above HEDGE_MAX_DELAY_MS (${config.HEDGE_MAX_DELAY_MS})`,
    );
  }
  return config;
}
