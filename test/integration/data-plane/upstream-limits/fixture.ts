import { readFileSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { freePort } from "../../../helpers/ports";
import { type StartedProcess, startProcess } from "../../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { RedisSeeder } from "../../../helpers/seed-redis";
import { sleep } from "../harness";
import { wsNetwork } from "../ws/ws-client";
import { type HugeUpstream, startHugeUpstream } from "./huge-upstream";

export const MiB = 1024 * 1024;

export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Runs `fn` while sampling `pid`'s RSS every 20 ms; returns fn's result and the peak seen. */
export async function withPeakRss<T>(pid: number, fn: () => Promise<T>): Promise<{ value: T; peak: number }> {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssBytes(pid));
  }, 20);
  try {
    const value = await fn();
    await sleep(100);
    peak = Math.max(peak, rssBytes(pid));
    return { value, peak };
  } finally {
    clearInterval(timer);
  }
}

/**
 * A data plane as its own process (so its RSS is its own) in front of a HugeUpstream, with a shared network
 * `eth` (HTTP and WebSocket), an app key and a SYNCED dedicated node `nodeId` on the same upstream.
 */
export interface BigAnswerGateway {
  readonly up: HugeUpstream;
  readonly dp: StartedProcess;
  /** `http://127.0.0.1:PORT` */
  readonly base: string;
  readonly appKey: string;
  readonly nodeKey: string;
  close(): Promise<void>;
}

export async function startBigAnswerGateway(
  nodeId: string,
  env: Record<string, string>,
): Promise<BigAnswerGateway> {
  const ns: TestRedisNamespace = createTestRedisNamespace();
  const seeder = new RedisSeeder(ns.prefix);
  const redis = new Redis(TEST_REDIS_URL);
  const up = await startHugeUpstream();
  await seeder.putNetwork(wsNetwork("eth", "EVM", [{ id: "u1", httpUrl: up.httpUrl, wsUrl: up.wsUrl }]));
  const appKey = await seeder.putKey({
    plan: { name: "t", requestsPerSecond: 1000, dailyRequestLimit: 1_000_000, monthlyRequestLimit: null },
  });
  const nodeKey = await seeder.putKey({ kind: "node", appId: null, nodeId, rpcMethods: "UNSAFE" });
  const rec: NodeRecord = {
    nodeId,
    workspaceId: "ws-test",
    protocol: "EVM",
    httpUrl: up.httpUrl,
    wsUrl: up.wsUrl,
    status: "SYNCED",
  };
  await redis.set(seeder.names.node(nodeId), JSON.stringify(rec));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const dp = await startProcess(
    process.execPath,
    [path.resolve(__dirname, "../../../../data-plane/src/main.js")],
    {
      env: {
        DATA_PLANE_PORT: String(port),
        DATA_PLANE_HOST: "127.0.0.1",
        REDIS_KEY_PREFIX: ns.prefix,
        LOG_LEVEL: "silent",
        // One failure would open the breaker: proves a refused big answer is not counted as one.
        BREAKER_FAILURE_THRESHOLD: "1",
        BREAKER_COOLDOWN_MS: "600000",
        UPSTREAM_MAX_ATTEMPTS: "1",
        USAGE_MODE: "off",
        ...env,
      },
      ready: async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200,
    },
  );
  return {
    up,
    dp,
    base,
    appKey,
    nodeKey,
    async close() {
      await dp.stop();
      await up.close();
      redis.disconnect();
      await seeder.close();
      await ns.cleanup();
    },
  };
}
