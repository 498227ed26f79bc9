import { ControlPlaneConfig, loadConfig } from "../../../control-plane/src/config";
import { ControlPlane, createControlPlane } from "../../../control-plane/src/server";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../data-plane/src/data-plane";
import { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { createTestDatabase, TestDatabase } from "../../helpers/postgres";
import {
  createTestRedisNamespace,
  SINGLE_REDIS,
  type TestRedisNamespace,
  type TestRedisTarget,
} from "../../helpers/redis";

export const ADMIN_TOKEN = "test-admin-token-0123456789abcdef";

/** GraphQL response data in tests: shape checked by the assertions that read it. */
// biome-ignore lint/suspicious/noExplicitAny: test responses are walked freely and checked by assertions
export type Json = Record<string, any>;

export interface GqlResult<T = Json> {
  status: number;
  data: T | null;
  errors?: { message: string; path?: string[]; extensions?: Json }[];
}

export interface Harness {
  cp: ControlPlane;
  config: ControlPlaneConfig;
  db: TestDatabase;
  ns: TestRedisNamespace;
  names: RedisNames;
  /** A separate Redis client for assertions (a cluster client when the harness runs on one). */
  redis: RedisClient;
  gql<T = Json>(query: string, variables?: Record<string, unknown>, token?: string): Promise<GqlResult<T>>;
  /** Like gql but fails the test on errors; returns data. */
  ok<T = Json>(query: string, variables?: Record<string, unknown>, token?: string): Promise<T>;
  signUp(email?: string): Promise<{ token: string; accountId: string; workspaceId: string }>;
  close(): Promise<void>;
}

let counter = 0;

export async function startHarness(
  env: Record<string, string> = {},
  opts: { log?: Logger; redis?: TestRedisTarget } = {},
): Promise<Harness> {
  const db = await createTestDatabase();
  const ns = createTestRedisNamespace(opts.redis ?? SINGLE_REDIS);
  const config = loadConfig({
    DATABASE_URL: db.url,
    ...ns.redis.env(),
    REDIS_KEY_PREFIX: ns.prefix,
    LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
    CONTROL_PLANE_PORT: "0",
    ADMIN_TOKEN,
    KEY_ENCRYPTION_SECRET: "test-key-encryption-secret-xyz",
    PUBLIC_HTTP_URL: "https://rpc.example.test",
    PUBLIC_WS_URL: "wss://rpc.example.test",
    // Every test signs up from 127.0.0.1; the sign-up throttle has its own test (graphql-limits.test.ts).
    SIGNUP_MAX_PER_IP: "1000000",
    ...env,
  });
  const cp = await createControlPlane(config, { host: "127.0.0.1", log: opts.log });
  const redis = ns.redis.client();
  const gql = async <T>(
    query: string,
    variables?: Record<string, unknown>,
    token?: string,
  ): Promise<GqlResult<T>> => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(cp.url, { method: "POST", headers, body: JSON.stringify({ query, variables }) });
    const body = (await res.json()) as { data?: T; errors?: GqlResult["errors"] };
    return { status: res.status, data: body.data ?? null, errors: body.errors };
  };
  const h: Harness = {
    cp,
    config,
    db,
    ns,
    names: new RedisNames(ns.prefix),
    redis,
    gql,
    async ok<T>(query: string, variables?: Record<string, unknown>, token?: string) {
      const r = await gql<T>(query, variables, token);
      if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
      return r.data as T;
    },
    async signUp(email?: string) {
      const e = email ?? `user${++counter}-${Date.now()}@example.com`;
      const d = await h.ok<{ signUp: { token: string; account: { id: string } } }>(
        `mutation($i: SignUpInput!) { signUp(input: $i) { token account { id email } } }`,
        { i: { email: e, password: "correct horse battery", workspaceName: `WS ${e}` } },
      );
      const ws = await h.ok<{ workspace: { id: string } }>("{ workspace { id } }", {}, d.signUp.token);
      return { token: d.signUp.token, accountId: d.signUp.account.id, workspaceId: ws.workspace.id };
    },
    async close() {
      await cp.close();
      redis.disconnect();
      await ns.cleanup();
      await db.drop();
    },
  };
  return h;
}

/** The `extensions.code` of the first error (or undefined). */
export function code(r: GqlResult): string | undefined {
  return r.errors?.[0]?.extensions?.code;
}

/** Creates the EVM network `slug` (chain id 31337) with one upstream at `httpUrl`, as the operator. */
export async function createStubNetwork(h: Harness, httpUrl: string, slug = "evm-stub"): Promise<void> {
  await h.ok(
    `mutation($slug: String!, $s: String!) {
      n: createNetwork(input: { slug: $slug, name: "Stub", protocol: EVM, chainId: 31337 }) { id }
      u: addUpstream(networkSlug: $slug, input: { httpUrl: $s }) { id } }`,
    { slug, s: httpUrl },
    ADMIN_TOKEN,
  );
}

export const APP_FIELDS = `id name environment workspaceId apiKey apiKeyCreatedAt previousApiKeyExpiresAt
  allowlist { id kind value createdAt }`;

export async function createApp(
  h: Harness,
  token: string,
  name = "my app",
): Promise<{ id: string; apiKey: string }> {
  const d = await h.ok<{ createApp: { id: string; apiKey: string } }>(
    `mutation($i: CreateAppInput!) { createApp(input: $i) { id apiKey } }`,
    { i: { name, environment: "PRODUCTION" } },
    token,
  );
  return d.createApp;
}

/**
 * A data plane in this process over the harness's Redis (its namespace and connection settings), on a free
 * loopback port, logging at LOG_LEVEL (silent by default); `env` is laid over that, as the process
 * environment would give it. The caller closes it.
 */
export function startHarnessDataPlane(h: Harness, env: Record<string, string> = {}): Promise<DataPlane> {
  return startDataPlane(
    loadDataPlaneConfig({
      ...h.ns.redis.env(),
      REDIS_KEY_PREFIX: h.ns.prefix,
      DATA_PLANE_PORT: "0",
      DATA_PLANE_HOST: "127.0.0.1",
      LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
      ...env,
    }),
  );
}
