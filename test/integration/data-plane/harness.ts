import { type DataPlaneConfig, loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, type DataPlaneOverrides, startDataPlane } from "../../../data-plane/src/data-plane";
import { serveMetrics } from "../../../shared/src/metrics/server";
import type { PlaneEvent } from "../../../shared/src/redis/records";
import { eventually } from "../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../helpers/redis";
import { RedisSeeder } from "../../helpers/seed-redis";

export interface Gateway {
  plane: DataPlane;
  seeder: RedisSeeder;
  ns: TestRedisNamespace;
  base: string;
  /** The plane's /metrics listener (METRICS_PORT's stand-in: in a process, main.ts opens it). */
  metricsBase: string;
  config: DataPlaneConfig;
  port(): number;
  /** Publishes a plane event and resolves once the plane has applied it (no sleep after a publish). */
  publish(event: PlaneEvent): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a data plane in this process on a free port against a fresh Redis namespace. `seed` runs
 * before start (networks must exist by then for readiness). Rate limits and quotas are off unless `env`
 * sets RATE_LIMIT_MODE / QUOTA_MODE (the suites in limits/ do; the others test everything else and send
 * more than the seeded free plan's 50 req/s). `ns` reuses a namespace (several instances on one prefix).
 */
export async function startGateway(
  env: Record<string, string>,
  seed: (seeder: RedisSeeder) => Promise<void>,
  overrides: DataPlaneOverrides = {},
  sharedNs?: TestRedisNamespace,
): Promise<Gateway> {
  const ns = sharedNs ?? createTestRedisNamespace();
  const seeder = new RedisSeeder(ns.prefix, ns.redis);
  await seed(seeder);
  const config = loadDataPlaneConfig({
    REDIS_KEY_PREFIX: ns.prefix,
    DATA_PLANE_PORT: "0",
    DATA_PLANE_HOST: "127.0.0.1",
    LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
    HEALTH_CHECK_INTERVAL_MS: "200",
    RATE_LIMIT_MODE: "off",
    QUOTA_MODE: "off",
    // The stub upstreams answer invented namespaces (lim_*, stub_*, test_slow, x_y, q_q): served here the
    // way an operator opens a chain's own namespaces. The policy tests use real unsafe names.
    SHARED_NODE_EXTRA_NAMESPACES: "lim,stub,test,x,q",
    // No late keep-alive requests to refuse in these suites: close without the 500 ms wait (the
    // durability suite tests the linger).
    SHUTDOWN_LINGER_MS: "0",
    // No state probes (eth_getBalance at old blocks) unless a suite turns them on: the stub upstreams
    // count every exchange (upstream-routing.test.ts tests the probes).
    UPSTREAM_STATE_PROBE_INTERVAL_MS: "0",
    ...ns.redis.env(),
    ...env,
  });
  const plane = await startDataPlane(config, overrides);
  const metrics = await serveMetrics({
    host: "127.0.0.1",
    port: 0,
    contentType: plane.context.metrics.contentType,
    render: () => plane.context.metrics.render(),
    logger: plane.context.logger,
  });
  return {
    plane,
    seeder,
    ns,
    config,
    base: `http://127.0.0.1:${plane.port}`,
    metricsBase: `http://127.0.0.1:${metrics.port}`,
    port: () => plane.port,
    async publish(event) {
      const before = plane.eventsApplied();
      await seeder.publish(event);
      await eventually(() => plane.eventsApplied() > before, `the plane to apply ${event.type}`);
    },
    async stop() {
      await plane.close();
      await metrics.close();
      await seeder.close();
      // A shared namespace belongs to the caller.
      if (sharedNs === undefined) await ns.cleanup();
    },
  };
}

export interface RpcResponse {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  json: any;
}

export async function post(
  url: string,
  body: string | object,
  headers: Record<string, string> = {},
): Promise<RpcResponse> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
