import { filterLimitRow } from "../../shared/src/jsonrpc/errors";
import { createLogger, type Logger } from "../../shared/src/log/logger";
import { createRedis } from "../../shared/src/redis/connect";
import { RedisNames } from "../../shared/src/redis/keys";
import { type Cidr, parseCidr } from "./allowlist/ip";
import { JwtVerifier, registerJwtMetrics } from "./auth/jwt";
import { JwtFailureThrottle } from "./auth/jwt-throttle";
import { CachingKeyVerifier } from "./auth/key-verifier";
import { KeyLookupThrottle } from "./auth/lookup-throttle";
import { dropReorged } from "./cache/call-cache";
import { LruResponseCache, NoopResponseCache } from "./cache/response-cache";
import { type SharedCacheMemory, SharedResponseCache } from "./cache/shared-response-cache";
import { type DataPlaneConfig, shutdownBudgetMs } from "./config";
import { FilterStore } from "./filters/filter-store";
import { GatewayFilters } from "./filters/gateway-filters";
import { PoolCalls } from "./forward/pool-calls";
import { LimitsGate } from "./limits/admission";
import { ConcurrencyLimiter } from "./limits/concurrency";
import { localTenantCounts, type TenantCountSet } from "./limits/tenant-counts";
import { type Metrics, PromMetrics } from "./metrics/metrics";
import { type NodeLookup, RedisNodeDirectory } from "./nodes/node-directory";
import { NodeGateway } from "./nodes/node-gateway";
import { registerNodeWsRoutes } from "./nodes/node-ws";
import type { GatewayContext } from "./pipeline/context";
import { SharedNodeMethodPolicy } from "./policy/method-policy";
import { type Clock, systemClock } from "./ratelimit/clock";
import { createLimits, type Limits, type QuotaTables } from "./ratelimit/limits";
import { createLimitsRedis } from "./ratelimit/redis-client";
import { createRequestLog } from "./requestlog/create";
import type { RequestLog } from "./requestlog/recorder";
import { batchScanner } from "./rpc/batch-spans";
import { HttpServer } from "./server/app";
import { assertNativeUws } from "./server/native-uws";
import { type PlaneState, RedisPlaneState } from "./state/redis-state";
import { createTracing } from "./telemetry/create";
import type { RequestTracing } from "./telemetry/tracing";
import { BufferBudget } from "./upstream/buffer-budget";
import { HealthPublisher } from "./upstream/health-publisher";
import { UpstreamRegistry } from "./upstream/registry";
import { ServedHeadShare } from "./upstream/served-head-share";
import { createUsageRecorder, type UsageRecorder } from "./usage";
import { WsGateway } from "./ws/gateway";

/** Defined with the configuration (the main thread of several reads it without loading the plane). */
export { shutdownBudgetMs };

export interface DataPlane {
  readonly port: number;
  /**
   * This plane's readiness: events subscription live, networks and upstream pools loaded. (Its /readyz,
   * as one thread among several, also waits for the other threads: PlaneThreadHooks.ready.)
   */
  ready(): boolean;
  /**
   * Closes the listen socket only (new connections refused, open ones served as before): the first step
   * of a shutdown of several threads (threads/supervisor.ts). `close()` does it too.
   */
  stopListening(): void;
  /** Stops listening, drains in-flight requests (up to SHUTDOWN_DRAIN_MS), closes upstreams and Redis. */
  close(): Promise<void>;
  /** For diagnostics and tests. */
  readonly context: GatewayContext;
  /**
   * Plane events, and Redis reconnects (which stand for the events missed meanwhile), applied to the
   * caches (keys, nodes, sockets) so far: a test waits for this to pass a count instead of sleeping after
   * a publish. A network reload one of them starts may still be running.
   */
  eventsApplied(): number;
  /** WebSocket side: routes, sessions, shared upstream subscriptions (and `route()` for more endpoints). */
  readonly ws: WsGateway;
  /** Usage recorder (flushed by close() after the drain). */
  readonly usage: UsageRecorder;
  /** Upstream health publisher; undefined when HEALTH_PUBLISH_INTERVAL_MS=0 or the state is injected. */
  readonly health: HealthPublisher | undefined;
}

export interface DataPlaneOverrides {
  logger?: Logger;
  metrics?: Metrics;
  state?: PlaneState;
  /** Dedicated node records (default: read from Redis). */
  nodes?: NodeLookup;
  /** Rate limiter + quota tracker (default: `createLimits(config)`); started and closed with the plane. */
  limits?: Limits;
  /** Clock of the default limits (tests step it across seconds and UTC days). */
  clock?: Clock;
  /**
   * Usage recorder (default: `createUsageRecorder(config)`, USAGE_MODE). An injected one is used as is:
   * the plane neither starts it nor closes it.
   */
  usage?: UsageRecorder;
  /** Budget of bytes buffered from upstream answers (default: UPSTREAM_BUFFER_BUDGET_BYTES for this plane). */
  bufferBudget?: BufferBudget;
  /** The per-tenant caps' counts (default: this plane's own; serving threads share one set). */
  tenantCounts?: TenantCountSet;
  /** Set when this plane is one of several serving threads of the process (threads/worker.ts). */
  thread?: PlaneThreadHooks;
  /** Request log (default: `createRequestLog(config)`, REQUEST_LOG_*). */
  requestLog?: RequestLog;
  /**
   * The failed key look-ups table (KeyLookupThrottle.allocate; default: this plane's own; serving threads
   * share one, so KEY_LOOKUP_MAX_FAILURES holds for the process).
   */
  keyLookupTable?: SharedArrayBuffer;
  /**
   * The per-second counts table (WindowCounts.allocate) and rate-limit instance id of the process
   * (default: this plane's own; serving threads share both, so a per-second limit holds for the process
   * and the process is one instance in the Redis reconciliation).
   */
  rateLimitTable?: SharedArrayBuffer;
  rateLimitInstanceId?: string;
  /**
   * The daily and monthly quota counts of the process (allocateQuotaTables; default: this plane's own;
   * serving threads share them, so a quota holds for the process, not per thread).
   */
  quotaTables?: QuotaTables;
  /**
   * The response cache's shared memory (allocateSharedCache; default: this plane's own lru-cache). Serving
   * threads share one, so an answer is fetched once per process and CACHE_MAX_BYTES bounds the process.
   */
  responseCache?: SharedCacheMemory;
  /** Request tracing (default: `createTracing`, from OTEL_*); an injected one is not shut down by the plane. */
  tracing?: RequestTracing;
}

/** What a plane running as one thread among several asks of the others (through the main thread). */
export interface PlaneThreadHooks {
  /** 1..DATA_PLANE_THREADS: named in /healthz, so a client (a test) can tell which thread a connection is on. */
  readonly index: number;
  /** /readyz of the process, given this thread's own readiness: ready only when every thread is. */
  ready(own: boolean): boolean;
}

/** Starts the data plane in this process: loads state from Redis, builds upstream pools, listens. */
export async function startDataPlane(
  config: DataPlaneConfig,
  overrides: DataPlaneOverrides = {},
): Promise<DataPlane> {
  // Before anything connects: on uWS's JavaScript fallback the process must not start at all.
  assertNativeUws();
  const logger = overrides.logger ?? createLogger("data-plane", config.LOG_LEVEL);
  const metrics = overrides.metrics ?? new PromMetrics();
  const state =
    overrides.state ??
    new RedisPlaneState({
      url: config.REDIS_URL,
      clusterNodes: config.REDIS_CLUSTER_NODES,
      prefix: config.REDIS_KEY_PREFIX,
      commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
      logger,
    });
  const trustedProxies: Cidr[] = [];
  for (const entry of config.TRUSTED_PROXIES) {
    const cidr = parseCidr(entry);
    if (cidr === undefined) throw new Error(`TRUSTED_PROXIES: not an address or CIDR: ${entry}`);
    trustedProxies.push(cidr);
  }
  const verifier = new CachingKeyVerifier({
    state,
    ttlMs: config.KEY_CACHE_TTL_MS,
    negativeTtlMs: config.NEGATIVE_KEY_CACHE_TTL_MS,
    maxEntries: config.KEY_CACHE_MAX_ENTRIES,
    logger,
    throttle: new KeyLookupThrottle(overrides.keyLookupTable ?? KeyLookupThrottle.allocate(), {
      maxFailures: config.KEY_LOOKUP_MAX_FAILURES,
      windowMs: config.KEY_LOOKUP_WINDOW_MS,
    }),
  });
  // One budget for every pool and the node endpoint: UPSTREAM_BUFFER_BUDGET_BYTES bounds them together.
  const bufferBudget = overrides.bufferBudget ?? new BufferBudget(config.UPSTREAM_BUFFER_BUDGET_BYTES);
  const cache =
    config.CACHE_MAX_BYTES <= 0
      ? new NoopResponseCache()
      : overrides.responseCache !== undefined
        ? new SharedResponseCache(overrides.responseCache, {
            mergeWaitMs: config.UPSTREAM_TIMEOUT_MS * config.UPSTREAM_MAX_ATTEMPTS,
          })
        : new LruResponseCache(config.CACHE_MAX_BYTES, config.CACHE_ADMISSION);
  // One set of pool options for the shared networks and the dedicated nodes (NodePools adjusts its own).
  const poolOptions = {
    timeoutMs: config.UPSTREAM_TIMEOUT_MS,
    connections: config.UPSTREAM_CONNECTIONS,
    breakerThreshold: config.BREAKER_FAILURE_THRESHOLD,
    breakerCooldownMs: config.BREAKER_COOLDOWN_MS,
    probeTimeoutMs: config.HEALTH_PROBE_TIMEOUT_MS,
    backoffDefaultMs: config.UPSTREAM_BACKOFF_DEFAULT_MS,
    backoffMaxMs: config.UPSTREAM_BACKOFF_MAX_MS,
    heavyMaxInFlight:
      config.UPSTREAM_HEAVY_SHARE_PERCENT >= 100
        ? 0
        : Math.max(1, Math.floor((config.UPSTREAM_CONNECTIONS * config.UPSTREAM_HEAVY_SHARE_PERCENT) / 100)),
    maxResponseBytes: config.UPSTREAM_MAX_RESPONSE_BYTES,
    bufferBudget,
    maxAttempts: config.UPSTREAM_MAX_ATTEMPTS,
    maxLagBlocks: config.HEALTH_MAX_LAG_BLOCKS,
    coalesceMax: config.UPSTREAM_COALESCE_MAX,
    logsSplitConcurrency: config.LOGS_SPLIT_CONCURRENCY,
    hedge: {
      enabled: config.HEDGE_ENABLED,
      minDelayMs: config.HEDGE_MIN_DELAY_MS,
      maxDelayMs: config.HEDGE_MAX_DELAY_MS,
      maxPercent: config.HEDGE_MAX_PERCENT,
    },
    headOutlierBlocks: config.HEAD_OUTLIER_BLOCKS,
    healthCheckIntervalMs: config.HEALTH_CHECK_INTERVAL_MS,
    stateProbeIntervalMs: config.UPSTREAM_STATE_PROBE_INTERVAL_MS,
    finality: config.CACHE_FINALITY_ENABLED,
    onReorg: (slug: string, fromHeight: number) => metrics.reorg(slug, dropReorged(cache, slug, fromHeight)),
  };
  const upstreams = new UpstreamRegistry(poolOptions, metrics, logger);
  const limits =
    overrides.limits ??
    createLimits(config, logger, {
      clock: overrides.clock,
      rateLimitTable: overrides.rateLimitTable,
      rateLimitInstanceId: overrides.rateLimitInstanceId,
      quotaTables: overrides.quotaTables,
    });
  const gate = new LimitsGate({ limits, metrics, publicPerSecond: config.PUBLIC_RATE_LIMIT_PER_SECOND });
  const ownedUsage =
    overrides.usage === undefined
      ? createUsageRecorder(config, {
          logger,
          registry: metrics instanceof PromMetrics ? metrics.registry : undefined,
        })
      : undefined;
  const usage = overrides.usage ?? ownedUsage!.recorder;
  const ownedRequestLog =
    overrides.requestLog === undefined
      ? createRequestLog(config, logger, metrics instanceof PromMetrics ? metrics.registry : undefined)
      : undefined;
  const requestLog = overrides.requestLog ?? ownedRequestLog!.log;
  metrics.limitsHealth(() => limits.redisHealth());
  const nodeLookup =
    overrides.nodes ??
    new RedisNodeDirectory({
      url: config.REDIS_URL,
      clusterNodes: config.REDIS_CLUSTER_NODES,
      prefix: config.REDIS_KEY_PREFIX,
      commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
      logger,
    });
  const ownedTracing =
    overrides.tracing === undefined ? createTracing(overrides.thread?.index ?? 0) : undefined;
  const tracing = overrides.tracing ?? ownedTracing!;
  const tenantCounts = overrides.tenantCounts ?? localTenantCounts();
  const flights = new ConcurrencyLimiter(
    config.MAX_IN_FLIGHT_PER_KEY,
    config.MAX_HEAVY_IN_FLIGHT_PER_KEY,
    tenantCounts,
  );
  const jwt = new JwtVerifier({
    maxEntries: config.JWT_CACHE_MAX_ENTRIES,
    nbfLeewaySeconds: config.JWT_NBF_LEEWAY_S,
    throttle: new JwtFailureThrottle({
      windowMs: config.JWT_FAILURE_WINDOW_MS,
      maxFailuresPerAddress: config.JWT_MAX_FAILURES_PER_ADDRESS,
      maxFailuresPerApp: config.JWT_MAX_FAILURES_PER_APP,
    }),
  });
  if (metrics instanceof PromMetrics) registerJwtMetrics(metrics.registry, jwt);
  const nodes = new NodeGateway({
    verifier,
    nodes: nodeLookup,
    logger,
    pool: poolOptions,
    metrics,
    // A node key: per node per second at the plan's rate, no daily quota (LimitsGate.admit). No
    // pool-wide calls (poolCalls): a dedicated node is one node.
    deps: { cache, metrics, flights, config, limits: gate, usage, requestLog },
  });
  // Filters live in Redis so that any instance and thread answers a poll (filters/filter-store.ts).
  const filtersRedis = createRedis(
    { url: config.REDIS_URL, clusterNodes: config.REDIS_CLUSTER_NODES },
    "dp-commands",
    { commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS, name: "data-plane:filters" },
  );
  filtersRedis.on("error", (err: Error) =>
    logger.warn({ err: err.message }, "filters redis connection error"),
  );
  const clock = overrides.clock ?? systemClock;
  const poolCalls = new PoolCalls({
    filters: new GatewayFilters(
      new FilterStore(
        filtersRedis,
        new RedisNames(config.REDIS_KEY_PREFIX),
        clock,
        config.FILTER_TTL_MS,
        config.MAX_FILTERS_PER_APP,
      ),
      filterLimitRow(config.MAX_FILTERS_PER_APP),
      config.FILTER_MAX_BLOCKS_PER_POLL,
    ),
    broadcastUpstreams: config.SEND_BROADCAST_UPSTREAMS,
    clock,
  });
  const context: GatewayContext = {
    poolCalls,
    nodes,
    config,
    logger,
    verifier,
    upstreams,
    policy: new SharedNodeMethodPolicy({ extraNamespaces: config.SHARED_NODE_EXTRA_NAMESPACES }),
    cache,
    metrics,
    trustedProxies,
    limits: gate,
    usage,
    requestLog,
    flights,
    tenantCounts,
    jwt,
    tracing,
  };

  let networksLoaded = false;
  let networksFingerprint = "";
  /**
   * The publication marker was seen in Redis once. Its absence afterwards means Redis lost its data
   * (restarted empty): the networks, pools and cached keys are then kept as they are (last known good
   * state) until the control plane's re-publish, announced by `resync`, brings the marker back. Before
   * it was ever seen (a fresh Redis, or a test seeding records directly) what Redis holds is applied.
   */
  let markerSeen = false;
  let reloading: Promise<void> | undefined;
  let reloadAgain = false;
  const reloadNetworks = (): Promise<void> => {
    if (reloading !== undefined) {
      reloadAgain = true;
      return reloading;
    }
    reloading = (async () => {
      do {
        reloadAgain = false;
        try {
          const { marker, networks: records } = await state.getPublishedNetworks();
          if (marker !== null) {
            markerSeen = true;
          } else if (markerSeen && networksLoaded) {
            logger.warn(
              { networks: upstreams.slugs().length },
              "redis holds no publication (restarted empty?): keeping the current networks until it is re-published",
            );
            continue;
          }
          // Cached answers belong to a network's nodes: when a network's definition changes (it could
          // now point at another chain), drop the response cache. Rare, and always safe.
          const fingerprint = JSON.stringify(
            records.map((r) => [r.slug, r.protocol, r.chainId, r.upstreams]),
          );
          if (networksLoaded && fingerprint !== networksFingerprint) cache.clear();
          networksFingerprint = fingerprint;
          await upstreams.apply(records);
          networksLoaded = true;
        } catch (err) {
          logger.warn(
            { err: (err as Error).message },
            "could not reload networks; keeping the current pools",
          );
        }
      } while (reloadAgain);
    })().finally(() => {
      reloading = undefined;
    });
    return reloading;
  };

  // Set once the server exists; events before that have no sockets to act on.
  let wsGateway: WsGateway | undefined;
  let eventsApplied = 0;
  state.on("event", (event) => {
    verifier.onEvent(event);
    nodeLookup.onEvent(event);
    wsGateway?.onEvent(event);
    if (event.type === "networks.update" || event.type === "resync") void reloadNetworks();
    eventsApplied++;
  });
  state.on("reconnect", (marker) => {
    // Emitted once both connections are back and the subscription is live, with the marker read after
    // that: from then on no event is missed. Cached keys may be stale (changes announced while we were
    // away): each is read again before its next use (served as cached only while its record cannot be
    // read). Not so when Redis came back without its publication: reading them again would turn every
    // key into "unknown" until the re-publish; its `resync` drops them then (or, if it landed before the
    // subscription was back, the marker is present here).
    if (marker !== null || !markerSeen) {
      verifier.revalidate();
      nodeLookup.revalidate();
      wsGateway?.revalidateAll();
    } else {
      logger.warn("redis reconnected without its publication: keeping cached keys until the re-publish");
    }
    void reloadNetworks();
    eventsApplied++;
  });

  await state.start();
  limits.start();
  await reloadNetworks();
  if (!networksLoaded) {
    await limits.close();
    await ownedUsage?.close();
    await ownedRequestLog?.close();
    await ownedTracing?.shutdown();
    filtersRedis.disconnect();
    throw new Error("data plane could not load networks from Redis");
  }
  upstreams.startHealthChecks();
  ownedUsage?.start();
  // The health records and the served head are shared through one connection of their own (timers, off
  // the hot path), and only with the real Redis state: a test that injects its own has no Redis for them.
  const sideRedis =
    (config.HEALTH_PUBLISH_INTERVAL_MS > 0 || config.SERVED_HEAD_SHARE_INTERVAL_MS > 0) &&
    overrides.state === undefined
      ? createLimitsRedis(config.REDIS_URL, {
          clusterNodes: config.REDIS_CLUSTER_NODES,
          commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
          name: "data-plane:health",
        })
      : undefined;
  sideRedis?.on("error", (err: Error) => logger.warn({ err: err.message }, "health redis connection error"));
  const health =
    sideRedis === undefined || config.HEALTH_PUBLISH_INTERVAL_MS === 0
      ? undefined
      : new HealthPublisher({
          redis: sideRedis,
          names: new RedisNames(config.REDIS_KEY_PREFIX),
          logger,
          intervalMs: config.HEALTH_PUBLISH_INTERVAL_MS,
          snapshot: () => upstreams.healthSnapshot(),
        });
  health?.start();
  const headShare =
    sideRedis === undefined || config.SERVED_HEAD_SHARE_INTERVAL_MS === 0
      ? undefined
      : new ServedHeadShare({
          redis: sideRedis,
          names: new RedisNames(config.REDIS_KEY_PREFIX),
          logger,
          intervalMs: config.SERVED_HEAD_SHARE_INTERVAL_MS,
          pools: () => upstreams.all(),
        });
  headShare?.start();
  ownedRequestLog?.start();

  const ready = () => state.subscribed && networksLoaded;
  const thread = overrides.thread;
  const server = new HttpServer(
    context,
    thread === undefined
      ? { ready }
      : {
          ready: () => thread.ready(ready()),
          thread: thread.index,
        },
  );
  const ws = new WsGateway(context, server.app);
  ws.registerAppRoutes();
  const nodeWs = registerNodeWsRoutes(ws, nodes);
  wsGateway = ws;
  const port = await server.listen(config.DATA_PLANE_HOST, config.DATA_PLANE_PORT);
  logger.info({ port, networks: upstreams.slugs(), batchScanner: batchScanner.kind }, "data plane listening");
  // Batches are still read right without the C scan, but several times slower: say why it is missing.
  if (batchScanner.error !== undefined)
    logger.warn(
      { reason: batchScanner.error },
      "batch scan addon not loaded (npm run build builds it): using the JS scan",
    );

  let closed: Promise<void> | undefined;
  return {
    port,
    ready,
    context,
    eventsApplied: () => eventsApplied,
    ws,
    usage,
    stopListening: () => server.stopListening(),
    health,
    close() {
      closed ??= (async () => {
        // HTTP and WebSocket drain together (each up to SHUTDOWN_DRAIN_MS). WebSocket messages arriving
        // meanwhile are refused (503 shutting_down, counted), so that drain waits only for what was in
        // flight at the signal. HTTP requests arriving on kept-alive connections are served and counted
        // until the HTTP drain ends (every answer carries `Connection: close`), then refused (503, counted).
        await Promise.all([server.close(config.SHUTDOWN_DRAIN_MS), ws.drain(config.SHUTDOWN_DRAIN_MS)]);
        // For SHUTDOWN_LINGER_MS late requests and messages on open connections are still refused, and
        // requests the drain ran out on get up to SHUTDOWN_LINGER_MS more. Then WebSockets close with 1001
        // and every connection is closed: nothing can be answered after this point.
        const cut = await server.linger(config.SHUTDOWN_LINGER_MS);
        if (cut > 0) logger.warn({ cut }, "requests still in flight after the drain were cut");
        await ws.close();
        server.closeAll();
        // After the last answer, so every unit served is in the final quota flush and every request object
        // answered is in the final usage flush (both flush in parallel; each retries up to its timeout).
        await Promise.all([limits.close(), ownedUsage?.close(), ownedRequestLog?.close()]);
        await health?.close();
        headShare?.close();
        sideRedis?.disconnect();
        filtersRedis.disconnect();
        await Promise.all([upstreams.close(), nodes.close()]);
        await state.close();
        nodeWs.close();
        await nodeLookup.close();
        // Last: the spans of the requests the drain answered are flushed too.
        await ownedTracing?.shutdown();
        logger.info("data plane stopped");
      })();
      return closed;
    },
  };
}
