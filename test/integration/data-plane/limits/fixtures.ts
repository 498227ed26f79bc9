import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readWorkspaceUsage, type WorkspaceUsage } from "../../../../data-plane/src/quota/read-usage";
import type { Clock } from "../../../../data-plane/src/ratelimit/clock";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually } from "../../../helpers/eventually";
import { SINGLE_REDIS, type TestRedisTarget } from "../../../helpers/redis";
import type { RpcResponse } from "../harness";

/** Limits on, through real Redis; no response cache so every call is forwarded (and counted upstream). */
export const LIMITS_ENV = {
  RATE_LIMIT_MODE: "redis",
  QUOTA_MODE: "redis",
  CACHE_MAX_BYTES: "0",
  QUOTA_FLUSH_INTERVAL_MS: "50",
  RATE_LIMIT_SYNC_INTERVAL_MS: "25",
};

/** A clock the test moves by hand (epoch ms). */
export class FakeClock implements Clock {
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** `offsetMs` into the current epoch second (a frozen clock far from a window edge). */
export function inSecond(offsetMs: number, base = Date.now()): number {
  return Math.floor(base / 1000) * 1000 + offsetMs;
}

/**
 * An upstream that answers every call with `"0x1"` (eth_chainId with the anvil chain id) and records, per
 * request object, its method and the epoch second it arrived in: what the gateway forwarded, and when.
 */
export class RecordingUpstream {
  url = "";
  /** method -> forwarded request objects. */
  readonly calls = new Map<string, number>();
  /** epoch second -> forwarded request objects of `watch`. */
  readonly perSecond = new Map<number, number>();
  watch = "";
  private server: Server | undefined;

  count(method: string): number {
    return this.calls.get(method) ?? 0;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        const sec = Math.floor(Date.now() / 1000);
        const parsed = JSON.parse(body) as unknown;
        const list = (Array.isArray(parsed) ? parsed : [parsed]) as { method: string; id?: unknown }[];
        const answers = list.map((r) => {
          this.calls.set(r.method, (this.calls.get(r.method) ?? 0) + 1);
          if (r.method === this.watch) this.perSecond.set(sec, (this.perSecond.get(sec) ?? 0) + 1);
          const result =
            r.method === "eth_chainId" ? "0x7a69" : r.method === "eth_blockNumber" ? "0x64" : "0x1";
          return { jsonrpc: "2.0", id: r.id ?? null, result };
        });
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** Reads a workspace's quota counters straight from Redis (as the control plane would). */
export class UsageReader {
  private readonly redis: RedisClient;
  private readonly names: RedisNames;

  constructor(prefix: string, target: TestRedisTarget = SINGLE_REDIS) {
    this.names = new RedisNames(prefix);
    this.redis = target.client();
  }

  read(workspaceId: string, nowMs = Date.now()): Promise<WorkspaceUsage> {
    return readWorkspaceUsage(this.redis, this.names, workspaceId, nowMs);
  }

  /** Polls until the day count equals `expected` (or the deadline passes); returns the last count. */
  async waitFor(
    workspaceId: string,
    expected: number,
    nowMs = Date.now(),
    timeoutMs = 10_000,
  ): Promise<number> {
    let count = -1;
    try {
      await eventually(
        async () => {
          count = (await this.read(workspaceId, nowMs)).count;
          return count === expected;
        },
        `the day count ${expected}`,
        timeoutMs,
      );
    } catch {
      // The caller asserts on the count, which names what was found.
    }
    return count;
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => undefined);
  }
}

export function call(method: string, id: number | string | null = 1, params?: unknown[]): object {
  return params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
}

export function batchOf(n: number, method: string, firstId = 1): object[] {
  return Array.from({ length: n }, (_, i) => call(method, firstId + i));
}

/** The contract shape of a limits refusal, common to every 429 the tests check. */
export function refusalData(r: RpcResponse): {
  code: number;
  reason: string;
  retryAfterMs: number;
  limit: number;
  message: string;
  id: unknown;
} {
  const body = r.json as {
    id: unknown;
    error: { code: number; message: string; data: Record<string, unknown> };
  };
  return {
    code: body.error.code,
    reason: body.error.data.reason as string,
    retryAfterMs: body.error.data.retryAfterMs as number,
    limit: body.error.data.limit as number,
    message: body.error.message,
    id: body.id,
  };
}
