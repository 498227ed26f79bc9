import { randomBytes } from "node:crypto";
import { z } from "zod";
import { commonEnvShape, env, parseEnv } from "../../shared/src/config/env";
import { validTrustedProxies } from "./auth/client-ip";

/** The fixed development secret used when `KEY_ENCRYPTION_SECRET` is not set (a warning is logged). */
export const DEV_KEY_ENCRYPTION_SECRET = "rpc-gateway-dev-key-encryption-secret-change-me";

const schema = z.object({
  ...commonEnvShape,
  CONTROL_PLANE_PORT: env.port(4000),
  /** Operator token. When unset, a random one is generated at start (and logged as generated, not shown). */
  ADMIN_TOKEN: z
    .string()
    .min(16, { error: "expected at least 16 characters" })
    .max(512, { error: "expected at most 512 characters" })
    .optional(),
  KEY_ENCRYPTION_SECRET: z.string().min(16, { error: "expected at least 16 characters" }).optional(),
  PUBLIC_HTTP_URL: env.url("http://127.0.0.1:8080", ["http:", "https:"]),
  PUBLIC_WS_URL: env.url("ws://127.0.0.1:8080", ["ws:", "wss:"]),
  /** Lifetime of tokens returned by signUp / logIn. */
  SESSION_TTL_SECONDS: env.int(7 * 24 * 3600, 60, 365 * 24 * 3600),
  /** Login attempts allowed per email and per client IP within one window. */
  LOGIN_MAX_ATTEMPTS: env.int(10, 1, 1_000_000),
  LOGIN_WINDOW_SECONDS: env.int(300, 1, 24 * 3600),
  /** Proxies (addresses / CIDR) whose X-Forwarded-For is believed for the client IP (login rate limit). */
  TRUSTED_PROXIES: env
    .list("")
    .refine(validTrustedProxies, { error: "expected a comma-separated list of IP addresses or CIDR ranges" }),
  /** Period of the worker's full re-publish job. */
  REPUBLISH_INTERVAL_SECONDS: env.int(300, 5, 24 * 3600),
  /** First wait before re-publishing after a failed publication (Redis down); doubles up to the max. */
  PUBLICATION_RETRY_MIN_MS: env.int(250, 10, 60_000),
  PUBLICATION_RETRY_MAX_MS: env.int(5_000, 10, 300_000),
  /** How often the worker checks that Redis still holds the publication marker (lost: re-publish at once). */
  REDIS_MARKER_CHECK_INTERVAL_MS: env.int(2_000, 100, 600_000),
});

export interface ControlPlaneConfig {
  databaseUrl: string;
  redisUrl: string;
  redisKeyPrefix: string;
  logLevel: string;
  port: number;
  adminToken: string;
  /** True when ADMIN_TOKEN was not set and a random one was generated for this process. */
  adminTokenGenerated: boolean;
  keyEncryptionSecret: string;
  /** True when KEY_ENCRYPTION_SECRET was not set and the fixed development secret is in use. */
  keyEncryptionSecretIsDefault: boolean;
  publicHttpUrl: string;
  publicWsUrl: string;
  sessionTtlSeconds: number;
  loginMaxAttempts: number;
  loginWindowSeconds: number;
  republishIntervalSeconds: number;
  trustedProxies: string[];
  publicationRetryMinMs: number;
  publicationRetryMaxMs: number;
  redisMarkerCheckIntervalMs: number;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): ControlPlaneConfig {
  const e = parseEnv(schema, source, { secrets: ["ADMIN_TOKEN", "KEY_ENCRYPTION_SECRET"] });
  return {
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    logLevel: e.LOG_LEVEL,
    port: e.CONTROL_PLANE_PORT,
    adminToken: e.ADMIN_TOKEN ?? randomBytes(32).toString("base64url"),
    adminTokenGenerated: e.ADMIN_TOKEN === undefined,
    keyEncryptionSecret: e.KEY_ENCRYPTION_SECRET ?? DEV_KEY_ENCRYPTION_SECRET,
    keyEncryptionSecretIsDefault: e.KEY_ENCRYPTION_SECRET === undefined,
    publicHttpUrl: e.PUBLIC_HTTP_URL.replace(/\/+$/, ""),
    publicWsUrl: e.PUBLIC_WS_URL.replace(/\/+$/, ""),
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    loginMaxAttempts: e.LOGIN_MAX_ATTEMPTS,
    loginWindowSeconds: e.LOGIN_WINDOW_SECONDS,
    republishIntervalSeconds: e.REPUBLISH_INTERVAL_SECONDS,
    trustedProxies: e.TRUSTED_PROXIES,
    publicationRetryMinMs: e.PUBLICATION_RETRY_MIN_MS,
    publicationRetryMaxMs: Math.max(e.PUBLICATION_RETRY_MIN_MS, e.PUBLICATION_RETRY_MAX_MS),
    redisMarkerCheckIntervalMs: e.REDIS_MARKER_CHECK_INTERVAL_MS,
  };
}
