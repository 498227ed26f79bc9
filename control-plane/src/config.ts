import { randomBytes } from "node:crypto";
import { z } from "zod";
import { commonEnvShape, env, parseEnv } from "../../shared/src/config/env";
import type { RedisNodeAddress, RedisTarget } from "../../shared/src/redis/connect";
import { validTrustedProxies } from "./auth/client-ip";
import type { GraphqlLimits } from "./graphql/limits";

/** The fixed development secret used when `KEY_ENCRYPTION_SECRET` is not set (a warning is logged). */
export const DEV_KEY_ENCRYPTION_SECRET = "rpc-gateway-dev-key-encryption-secret-change-me";

const schema = z.object({
  ...commonEnvShape,
  CONTROL_PLANE_PORT: env.port(4000),
  /**
   * Interface the control plane binds to. Every interface by default, as a container needs (compose's
   * published port, a Kubernetes Service); `npm start` sets 127.0.0.1 unless told otherwise.
   */
  CONTROL_PLANE_HOST: z.string().min(1).default("0.0.0.0"),
  /**
   * Prometheus `GET /metrics` of the control plane process and of the worker process, each on its own
   * listener apart from the API (the series name operations and queues). Loopback by default: only this
   * host can scrape; 0.0.0.0 in a container. 0 = a free port.
   */
  CONTROL_PLANE_METRICS_PORT: env.port(9465),
  CONTROL_PLANE_METRICS_HOST: z.string().min(1).default("127.0.0.1"),
  WORKER_METRICS_PORT: env.port(9466),
  WORKER_METRICS_HOST: z.string().min(1).default("127.0.0.1"),
  /** Operator token. When unset, a random one is generated at start (and logged as generated, not shown). */
  ADMIN_TOKEN: z
    .string()
    .min(16, { error: "expected at least 16 characters" })
    .max(512, { error: "expected at most 512 characters" })
    .optional(),
  KEY_ENCRYPTION_SECRET: z.string().min(16, { error: "expected at least 16 characters" }).optional(),
  PUBLIC_HTTP_URL: env.url("http://127.0.0.1:8080", ["http:", "https:"]),
  PUBLIC_WS_URL: env.url("ws://127.0.0.1:8080", ["ws:", "wss:"]),
  /**
   * The console's public base URL (e.g. `https://console.example.com/console`), the base of invitation
   * links. Unset: this control plane's own `http://127.0.0.1:{port}/console`.
   */
  PUBLIC_CONSOLE_URL: z
    .string()
    .optional()
    .refine(
      (v) => {
        if (v === undefined) return true;
        try {
          return ["http:", "https:"].includes(new URL(v).protocol);
        } catch {
          return false;
        }
      },
      { error: "expected a URL with scheme http: or https:" },
    ),
  /** Lifetime of tokens returned by signUp / logIn. */
  SESSION_TTL_SECONDS: env.int(7 * 24 * 3600, 60, 365 * 24 * 3600),
  /**
   * Personal access tokens (createAccessToken): the lifetime when `expiresInSeconds` is not given, and
   * the longest one that may be asked for.
   */
  ACCESS_TOKEN_TTL_SECONDS: env.int(30 * 24 * 3600, 60, 10 * 365 * 24 * 3600),
  ACCESS_TOKEN_MAX_TTL_SECONDS: env.int(365 * 24 * 3600, 60, 10 * 365 * 24 * 3600),
  /** Log-in attempts allowed per client address (IPv6: /64), over all emails, within one window. */
  LOGIN_MAX_ATTEMPTS: env.int(30, 1, 1_000_000),
  LOGIN_WINDOW_SECONDS: env.int(300, 1, 24 * 3600),
  /**
   * Per (email, client address): failures before back-off, then a wait of LOGIN_BACKOFF_BASE_MS doubling
   * per further failure up to LOGIN_BACKOFF_MAX_MS. Another address is not held up.
   */
  LOGIN_FREE_FAILURES: env.int(5, 1, 1000),
  LOGIN_BACKOFF_BASE_MS: env.int(1000, 1, 3_600_000),
  LOGIN_BACKOFF_MAX_MS: env.int(900_000, 1, 24 * 3_600_000),
  /** Log-in attempts allowed per email over all addresses within LOGIN_EMAIL_WINDOW_SECONDS (a high ceiling). */
  LOGIN_EMAIL_MAX_ATTEMPTS: env.int(1000, 1, 1_000_000),
  LOGIN_EMAIL_WINDOW_SECONDS: env.int(3600, 1, 7 * 24 * 3600),
  /** Proxies (addresses / CIDR) whose X-Forwarded-For is believed for the client IP (login rate limit). */
  TRUSTED_PROXIES: env
    .list("")
    .refine(validTrustedProxies, { error: "expected a comma-separated list of IP addresses or CIDR ranges" }),
  /** Period of the worker's full re-publish job. */
  REPUBLISH_INTERVAL_SECONDS: env.int(300, 5, 24 * 3600),
  /**
   * Slow clients: whole headers must arrive within CONTROL_PLANE_HEADERS_TIMEOUT_MS and the whole request
   * within CONTROL_PLANE_REQUEST_TIMEOUT_MS (Node's defaults, 60 s / 300 s, let a dribbling client hold a
   * socket for minutes); a late request is answered 408 and its socket closed.
   */
  CONTROL_PLANE_HEADERS_TIMEOUT_MS: env.int(10_000, 100, 600_000),
  CONTROL_PLANE_REQUEST_TIMEOUT_MS: env.int(30_000, 100, 3_600_000),
  /** GraphQL operation limits (GraphQL Armor), over HTTP and graphql-ws alike. */
  GRAPHQL_MAX_DEPTH: env.int(10, 2, 100),
  GRAPHQL_MAX_ALIASES: env.int(15, 0, 1000),
  GRAPHQL_MAX_TOKENS: env.int(2000, 100, 100_000),
  GRAPHQL_MAX_COST: env.int(5000, 100, 1_000_000),
  /**
   * Objects one operation may ask for, each list counted at its `first`/`limit` argument or its largest
   * size (graphql/cost.ts): a query over every app with its keys, allowlists and endpoints is refused.
   */
  GRAPHQL_MAX_LIST_COST: env.int(20_000, 100, 10_000_000),
  GRAPHQL_MAX_DIRECTIVES: env.int(50, 0, 1000),
  /** Largest /graphql HTTP body and largest graphql-ws message. */
  GRAPHQL_MAX_BODY_BYTES: env.int(1024 * 1024, 1024, 64 * 1024 * 1024),
  /** Schema introspection (`__schema`); off by default: the schema is published as schema.graphql. */
  GRAPHQL_INTROSPECTION: env.bool(false),
  /** How often open graphql-ws connections re-check their token (revoked, expired or deleted). */
  GRAPHQL_WS_AUTH_RECHECK_MS: env.int(5000, 50, 3_600_000),
  /** Operations (subscriptions) one graphql-ws connection may run at once. */
  GRAPHQL_WS_MAX_OPERATIONS: env.int(100, 1, 100_000),
  /** signUp calls allowed per client IP within one window. */
  SIGNUP_MAX_PER_IP: env.int(10, 1, 1_000_000),
  SIGNUP_WINDOW_SECONDS: env.int(3600, 1, 7 * 24 * 3600),
  /** Longest usage range (`usage(filter: {from, to})`, `history(days:)`). */
  USAGE_MAX_RANGE_DAYS: env.int(400, 1, 3650),
  /** Most points one usage series may hold (hourly up to 7 days, daily beyond). */
  USAGE_MAX_SERIES_POINTS: env.int(500, 24, 100_000),
  /**
   * Where tenants ask for a plan they cannot pick themselves (an email address, a URL or a sentence),
   * shown on the console's Plan page. Unset: the page just says to contact the operator.
   */
  PLAN_CONTACT: z.string().trim().max(200, { error: "expected at most 200 characters" }).optional(),
  /** `production` makes KEY_ENCRYPTION_SECRET and ADMIN_TOKEN mandatory (see `productionShape`). */
  NODE_ENV: z.string().default("development"),
  /** First wait before re-publishing after a failed publication (Redis down); doubles up to the max. */
  PUBLICATION_RETRY_MIN_MS: env.int(250, 10, 60_000),
  PUBLICATION_RETRY_MAX_MS: env.int(5_000, 10, 300_000),
  /** How often the worker checks that Redis still holds the publication marker (lost: re-publish at once). */
  REDIS_MARKER_CHECK_INTERVAL_MS: env.int(2_000, 100, 600_000),
  /**
   * Webhook delivery to loopback, link-local, private (RFC 1918, ULA, CGNAT), unspecified and other
   * non-public addresses. Off: such URLs are refused at creation and every resolved address is checked
   * at delivery. Tests and closed networks turn it on.
   */
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: env.bool(false),
  /** One delivery attempt (connect, headers and body) must finish within this. */
  WEBHOOK_TIMEOUT_MS: env.int(10_000, 100, 120_000),
  /** Attempts per delivery; between attempt n and n+1 the worker waits WEBHOOK_RETRY_BASE_MS * 2^(n-1). */
  WEBHOOK_MAX_ATTEMPTS: env.int(6, 1, 20),
  WEBHOOK_RETRY_BASE_MS: env.int(60_000, 10, 3_600_000),
  /** Period of the worker's check of daily quota counters against the 80% / 100% thresholds. */
  WEBHOOK_QUOTA_CHECK_INTERVAL_MS: env.int(30_000, 100, 3_600_000),
  /** Period of the worker's `usage.daily` pass (it emits each workspace's previous UTC day once). */
  WEBHOOK_USAGE_DAILY_INTERVAL_MS: env.int(300_000, 100, 3_600_000),
  /**
   * How long after 00:00 UTC the previous day is reported: the data planes' last flushes of the day
   * (USAGE_FLUSH_INTERVAL_MS) and their ingestion must be in the rollups first.
   */
  WEBHOOK_USAGE_DAILY_DELAY_MS: env.int(600_000, 0, 21_600_000),
  /** Deliveries (with their attempts) older than this are deleted. */
  WEBHOOK_DELIVERY_RETENTION_DAYS: env.int(30, 1, 3650),
  /** Deliveries one worker sends at once. */
  WEBHOOK_CONCURRENCY: env.int(8, 1, 256),
  /**
   * Deliveries of one workspace attempted at once, all workers together; the workspace's other deliveries
   * wait (no attempt used), so one tenant's slow endpoints cannot hold every delivery slot.
   */
  WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: env.int(2, 1, 256),
  /** `sendTestWebhook` calls per endpoint per WEBHOOK_TEST_WINDOW_SECONDS; past it TOO_MANY_REQUESTS. */
  WEBHOOK_TEST_MAX_PER_ENDPOINT: env.int(5, 1, 10_000),
  WEBHOOK_TEST_WINDOW_SECONDS: env.int(60, 1, 86_400),
});

/** The environment schema: docs/contracts.md lists every variable (test/unit/docs/contracts.test.ts checks it). */
export const ControlPlaneEnvSchema = schema;

/** Shortest KEY_ENCRYPTION_SECRET / ADMIN_TOKEN accepted with NODE_ENV=production: 32 bytes. */
export const PRODUCTION_MIN_SECRET_BYTES = 32;

const productionSecret = () => {
  const hint = `required with NODE_ENV=production: at least ${PRODUCTION_MIN_SECRET_BYTES} bytes, e.g. from \`openssl rand -base64 32\``;
  return z
    .string({ error: hint })
    .refine((v) => Buffer.byteLength(v, "utf8") >= PRODUCTION_MIN_SECRET_BYTES, { error: hint });
};

/**
 * With NODE_ENV=production the development fallbacks are refused: a control plane started without
 * KEY_ENCRYPTION_SECRET would seal every key with the secret published in this file, and one without
 * ADMIN_TOKEN would run with an operator token nobody knows. Both must be set and at least 32 bytes.
 */
const productionShape = {
  KEY_ENCRYPTION_SECRET: productionSecret().refine((v) => v !== DEV_KEY_ENCRYPTION_SECRET, {
    error: "the published development secret is refused with NODE_ENV=production",
  }),
  ADMIN_TOKEN: productionSecret().pipe(schema.shape.ADMIN_TOKEN.unwrap()),
};

/** Webhook settings (WEBHOOK_*), read by the control plane (URL checks, test sends) and the worker. */
export interface WebhookSettings {
  allowPrivateAddresses: boolean;
  timeoutMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  quotaCheckIntervalMs: number;
  usageDailyIntervalMs: number;
  usageDailyDelayMs: number;
  deliveryRetentionDays: number;
  concurrency: number;
  maxInFlightPerWorkspace: number;
  testMaxPerEndpoint: number;
  testWindowSeconds: number;
}

/** Where a process serves its Prometheus /metrics (port 0: a free one). */
export interface MetricsListenAt {
  host: string;
  port: number;
}

export interface ControlPlaneConfig {
  databaseUrl: string;
  redisUrl: string;
  /** REDIS_CLUSTER_NODES: empty = the single Redis at `redisUrl`. */
  redisClusterNodes: RedisNodeAddress[];
  redisKeyPrefix: string;
  logLevel: string;
  port: number;
  /** CONTROL_PLANE_HOST: the interface to bind. */
  host: string;
  /** CONTROL_PLANE_METRICS_HOST / _PORT: the control plane process's /metrics listener. */
  controlPlaneMetrics: MetricsListenAt;
  /** WORKER_METRICS_HOST / _PORT: the worker process's /metrics listener. */
  workerMetrics: MetricsListenAt;
  adminToken: string;
  /** True when ADMIN_TOKEN was not set and a random one was generated for this process. */
  adminTokenGenerated: boolean;
  keyEncryptionSecret: string;
  /** True when KEY_ENCRYPTION_SECRET was not set and the fixed development secret is in use. */
  keyEncryptionSecretIsDefault: boolean;
  publicHttpUrl: string;
  publicWsUrl: string;
  /** PUBLIC_CONSOLE_URL without a trailing slash; null: derived from the bound port. */
  publicConsoleUrl: string | null;
  sessionTtlSeconds: number;
  accessTokenTtlSeconds: number;
  accessTokenMaxTtlSeconds: number;
  loginMaxAttempts: number;
  loginWindowSeconds: number;
  loginFreeFailures: number;
  loginBackoffBaseMs: number;
  loginBackoffMaxMs: number;
  loginEmailMaxAttempts: number;
  loginEmailWindowSeconds: number;
  republishIntervalSeconds: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  trustedProxies: string[];
  graphqlLimits: GraphqlLimits;
  graphqlMaxBodyBytes: number;
  graphqlIntrospection: boolean;
  graphqlWsAuthRecheckMs: number;
  graphqlWsMaxOperations: number;
  signUpMaxPerIp: number;
  signUpWindowSeconds: number;
  usageMaxRangeDays: number;
  usageMaxSeriesPoints: number;
  /** PLAN_CONTACT; null when unset or blank. */
  planContact: string | null;
  publicationRetryMinMs: number;
  publicationRetryMaxMs: number;
  redisMarkerCheckIntervalMs: number;
  webhooks: WebhookSettings;
}

/**
 * Parses the environment once; throws a ConfigError naming every bad variable. `opts.worker`: the worker
 * process, which authenticates nobody, so NODE_ENV=production does not make it require ADMIN_TOKEN (a
 * secret is given only to the processes that use it); it does require KEY_ENCRYPTION_SECRET, which opens
 * the webhook signing secrets it signs deliveries with.
 */
export function loadConfig(
  source: NodeJS.ProcessEnv = process.env,
  opts: { worker?: boolean } = {},
): ControlPlaneConfig {
  // The production shape only narrows (a required string where the base allows undefined), so the
  // parsed value still has the base schema's type.
  const production = opts.worker
    ? { KEY_ENCRYPTION_SECRET: productionShape.KEY_ENCRYPTION_SECRET }
    : productionShape;
  const effective =
    source.NODE_ENV === "production" ? (schema.extend(production) as unknown as typeof schema) : schema;
  const e = parseEnv(effective, source, { secrets: ["ADMIN_TOKEN", "KEY_ENCRYPTION_SECRET"] });
  return {
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redisClusterNodes: e.REDIS_CLUSTER_NODES,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    logLevel: e.LOG_LEVEL,
    port: e.CONTROL_PLANE_PORT,
    host: e.CONTROL_PLANE_HOST,
    controlPlaneMetrics: { host: e.CONTROL_PLANE_METRICS_HOST, port: e.CONTROL_PLANE_METRICS_PORT },
    workerMetrics: { host: e.WORKER_METRICS_HOST, port: e.WORKER_METRICS_PORT },
    adminToken: e.ADMIN_TOKEN ?? randomBytes(32).toString("base64url"),
    adminTokenGenerated: e.ADMIN_TOKEN === undefined,
    keyEncryptionSecret: e.KEY_ENCRYPTION_SECRET ?? DEV_KEY_ENCRYPTION_SECRET,
    keyEncryptionSecretIsDefault: e.KEY_ENCRYPTION_SECRET === undefined,
    publicHttpUrl: e.PUBLIC_HTTP_URL.replace(/\/+$/, ""),
    publicWsUrl: e.PUBLIC_WS_URL.replace(/\/+$/, ""),
    publicConsoleUrl: e.PUBLIC_CONSOLE_URL ? e.PUBLIC_CONSOLE_URL.replace(/\/+$/, "") : null,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    accessTokenMaxTtlSeconds: e.ACCESS_TOKEN_MAX_TTL_SECONDS,
    // A default above the maximum would mint tokens nobody could ask for explicitly.
    accessTokenTtlSeconds: Math.min(e.ACCESS_TOKEN_TTL_SECONDS, e.ACCESS_TOKEN_MAX_TTL_SECONDS),
    loginMaxAttempts: e.LOGIN_MAX_ATTEMPTS,
    loginWindowSeconds: e.LOGIN_WINDOW_SECONDS,
    loginFreeFailures: e.LOGIN_FREE_FAILURES,
    loginBackoffBaseMs: e.LOGIN_BACKOFF_BASE_MS,
    loginBackoffMaxMs: Math.max(e.LOGIN_BACKOFF_BASE_MS, e.LOGIN_BACKOFF_MAX_MS),
    loginEmailMaxAttempts: e.LOGIN_EMAIL_MAX_ATTEMPTS,
    loginEmailWindowSeconds: e.LOGIN_EMAIL_WINDOW_SECONDS,
    republishIntervalSeconds: e.REPUBLISH_INTERVAL_SECONDS,
    headersTimeoutMs: e.CONTROL_PLANE_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: Math.max(e.CONTROL_PLANE_HEADERS_TIMEOUT_MS, e.CONTROL_PLANE_REQUEST_TIMEOUT_MS),
    trustedProxies: e.TRUSTED_PROXIES,
    graphqlLimits: {
      maxDepth: e.GRAPHQL_MAX_DEPTH,
      maxAliases: e.GRAPHQL_MAX_ALIASES,
      maxTokens: e.GRAPHQL_MAX_TOKENS,
      maxCost: e.GRAPHQL_MAX_COST,
      maxListCost: e.GRAPHQL_MAX_LIST_COST,
      maxDirectives: e.GRAPHQL_MAX_DIRECTIVES,
    },
    graphqlMaxBodyBytes: e.GRAPHQL_MAX_BODY_BYTES,
    graphqlIntrospection: e.GRAPHQL_INTROSPECTION,
    graphqlWsAuthRecheckMs: e.GRAPHQL_WS_AUTH_RECHECK_MS,
    graphqlWsMaxOperations: e.GRAPHQL_WS_MAX_OPERATIONS,
    signUpMaxPerIp: e.SIGNUP_MAX_PER_IP,
    signUpWindowSeconds: e.SIGNUP_WINDOW_SECONDS,
    usageMaxRangeDays: e.USAGE_MAX_RANGE_DAYS,
    usageMaxSeriesPoints: e.USAGE_MAX_SERIES_POINTS,
    planContact: e.PLAN_CONTACT || null,
    publicationRetryMinMs: e.PUBLICATION_RETRY_MIN_MS,
    publicationRetryMaxMs: Math.max(e.PUBLICATION_RETRY_MIN_MS, e.PUBLICATION_RETRY_MAX_MS),
    redisMarkerCheckIntervalMs: e.REDIS_MARKER_CHECK_INTERVAL_MS,
    webhooks: {
      allowPrivateAddresses: e.WEBHOOK_ALLOW_PRIVATE_ADDRESSES,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
      quotaCheckIntervalMs: e.WEBHOOK_QUOTA_CHECK_INTERVAL_MS,
      usageDailyIntervalMs: e.WEBHOOK_USAGE_DAILY_INTERVAL_MS,
      usageDailyDelayMs: e.WEBHOOK_USAGE_DAILY_DELAY_MS,
      deliveryRetentionDays: e.WEBHOOK_DELIVERY_RETENTION_DAYS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      maxInFlightPerWorkspace: e.WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE,
      testMaxPerEndpoint: e.WEBHOOK_TEST_MAX_PER_ENDPOINT,
      testWindowSeconds: e.WEBHOOK_TEST_WINDOW_SECONDS,
    },
  };
}

/** Where this process's Redis is (a single server or a cluster), for `createRedis`. */
export function redisTarget(config: Pick<ControlPlaneConfig, "redisUrl" | "redisClusterNodes">): RedisTarget {
  return { url: config.redisUrl, clusterNodes: config.redisClusterNodes };
}
