import assert from "node:assert/strict";
import type { VerifiedKey } from "../../../data-plane/src/auth/key-verifier";
import type { RequestLog } from "../../../data-plane/src/requestlog/recorder";
import type { UsageContext, UsageRecorder } from "../../../data-plane/src/usage";
import type { NodeRecord } from "../../../shared/src/redis/records";
import type { RequestLogRecord } from "../../../shared/src/requestlog/contract";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, startGateway } from "./harness";
import { TestWsClient } from "./ws/ws-client";

/**
 * Parity of the transports (issue 25, section 3): the same requests over HTTP, WebSocket and a dedicated
 * node's endpoint (HTTP and WebSocket) through one request pipeline give the same error objects, the same
 * usage records and quota units, the same request-log rows, and (HTTP and the node's HTTP) the same
 * headers. Real parts: anvil behind the shared network and the nodes, Redis for keys and limits.
 */

const NODE_A = "5d0c2a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6";
const NODE_B = "6e1d3b5f-2c3d-4e6f-9a01-b2c3d4e5f6a7";
const PLAN = {
  name: "parity",
  requestsPerSecond: 80,
  dailyRequestLimit: 1_000_000,
  monthlyRequestLimit: null,
};
const ZERO = "0x0000000000000000000000000000000000000000";
/** Read before the cases, so that the pools know their head (never read by a case). */
const WARM = "0x0000000000000000000000000000000000000001";

type Transport = "http" | "ws" | "node-http" | "node-ws";
const TRANSPORTS: readonly Transport[] = ["http", "ws", "node-http", "node-ws"];

const call = (id: number | string | undefined, method: string, params: unknown[] = []) =>
  id === undefined ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", id, method, params };

interface Case {
  name: string;
  body: string;
  /** Sent this many times before the one looked at (a cache hit: stored on its second sight, cache/doorkeeper.ts). */
  warm?: number;
  /** No answer expected over WebSocket (notifications only): wait for this many usage units instead. */
  silentUnits?: number;
}

const CASES: Case[] = [
  { name: "single call", body: JSON.stringify(call(1, "eth_getBalance", [ZERO, "latest"])) },
  {
    name: "batch",
    body: JSON.stringify([
      call(1, "net_version"),
      call(2, "eth_getBalance", [ZERO, "latest"]),
      call("x", "eth_chainId"),
    ]),
  },
  { name: "notification", body: JSON.stringify(call(undefined, "net_version")), silentUnits: 1 },
  {
    name: "batch with a notification",
    body: JSON.stringify([call(undefined, "net_version"), call(7, "net_version")]),
  },
  { name: "cache hit", body: JSON.stringify(call(3, "eth_chainId")), warm: 2 },
  { name: "parse error", body: "{nope" },
  { name: "invalid request", body: JSON.stringify({ jsonrpc: "1.0", id: 4, method: "eth_chainId" }) },
  { name: "empty batch", body: "[]" },
  { name: "blocked method", body: JSON.stringify(call(5, "personal_listAccounts")) },
  {
    name: "batch with a blocked element",
    body: JSON.stringify([call(1, "personal_listAccounts"), call(2, "net_version"), { foo: 1 }]),
  },
  { name: "node error passed through", body: JSON.stringify(call(6, "eth_getBalance", ["0xzz", "latest"])) },
  {
    name: "over the per-second limit",
    body: JSON.stringify(Array.from({ length: 90 }, (_, i) => call(i, "net_version"))),
  },
];

/** An error object as compared across transports: everything but the request id and the retry hint. */
function errorShape(e: { code: number; message: string; data?: Record<string, unknown> }) {
  return {
    code: e.code,
    message: e.message,
    category: e.data?.category,
    reason: e.data?.reason,
    limit: e.data?.limit,
  };
}

interface Observed {
  /** Distinct error objects (ids left out) and the successful ids with their results, in id order. */
  errors: string[];
  results: string[];
  usage: Record<string, number>;
  served: number;
  log: string[];
  status?: number;
  xCache?: string;
  retryAfter?: boolean;
  rateHeaders?: boolean;
}

describe("data plane: parity of the transports (HTTP, WebSocket, dedicated node HTTP and WebSocket)", function () {
  this.timeout(120_000);
  let anvil: Anvil;
  let gw: Gateway;
  const usage: UsageContext[] = [];
  const log: RequestLogRecord[] = [];
  const served: { id: string; units: number }[] = [];
  const keys = {} as Record<Transport, string>;
  const ws = {} as Record<"ws" | "node-ws", TestWsClient>;
  const table: Record<string, Record<Transport, Observed>> = {};

  const usageRecorder: UsageRecorder = {
    record: (c) => void usage.push(c),
    flush: async () => {},
    close: async () => {},
  };
  const requestLog: RequestLog = {
    wants: () => true,
    record: (r) => void log.push({ ...r }),
    flush: async () => {},
    close: async () => {},
  };

  /** Whose records are whose: each transport has its own app (or node), so its own usage and windows. */
  const owner: Record<Transport, (u: { appId: string | null; network: string }) => boolean> = {
    http: (u) => u.appId === "app-http",
    ws: (u) => u.appId === "app-ws",
    "node-http": (u) => u.network === `node-${NODE_A}`,
    "node-ws": (u) => u.network === `node-${NODE_B}`,
  };
  const servedId: Record<Transport, string> = {
    http: "app-http",
    ws: "app-ws",
    "node-http": NODE_A,
    "node-ws": NODE_B,
  };

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway(
      { RATE_LIMIT_MODE: "local", QUOTA_MODE: "local" },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "u1", httpUrl: anvil.httpUrl }]));
        keys.http = await s.putKey({ workspaceId: "ws-http", appId: "app-http", plan: PLAN });
        keys.ws = await s.putKey({ workspaceId: "ws-ws", appId: "app-ws", plan: PLAN });
        keys["node-http"] = await s.putKey({
          kind: "node",
          appId: null,
          nodeId: NODE_A,
          workspaceId: "ws-node",
          rpcMethods: "SAFE",
          plan: PLAN,
        });
        keys["node-ws"] = await s.putKey({
          kind: "node",
          appId: null,
          nodeId: NODE_B,
          workspaceId: "ws-node",
          rpcMethods: "SAFE",
          plan: PLAN,
        });
      },
      { usage: usageRecorder, requestLog },
    );
    for (const nodeId of [NODE_A, NODE_B]) {
      const rec: NodeRecord = {
        nodeId,
        workspaceId: "ws-node",
        protocol: "EVM",
        httpUrl: anvil.httpUrl,
        wsUrl: anvil.wsUrl,
        status: "SYNCED",
      };
      await gw.ns.redis.client().set(gw.seeder.names.node(nodeId), JSON.stringify(rec));
      await gw.seeder.publish({ type: "node.update", nodeId });
    }
    // Response units handed to the quota, per app (node keys too: the gate charges them to no quota).
    const gate = gw.plane.context.limits;
    const recordServed = gate.recordServed.bind(gate);
    gate.recordServed = (key: VerifiedKey | undefined, units: number) => {
      const r = key?.record;
      if (r !== undefined) served.push({ id: r.kind === "node" ? (r.nodeId ?? "") : (r.appId ?? ""), units });
      recordServed(key, units);
    };
    // The node's pool knows its head (per-block answers are cacheable, X-Cache MISS) as the network's does.
    for (const t of ["http", "node-http"] as const) {
      await eventually(async () => {
        const r = await fetch(url(t), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(call(1, "eth_getBalance", [WARM, "latest"])),
        });
        await r.text();
        return (r.headers.get("x-cache") ?? "") !== "";
      }, `${t}: head known`);
    }
    usage.length = 0;
    log.length = 0;
    served.length = 0;
    const base = `ws://127.0.0.1:${gw.port()}`;
    ws.ws = await TestWsClient.open(`${base}/eth/rpc?apikey=${keys.ws}`);
    ws["node-ws"] = await TestWsClient.open(`${base}/nodes/${NODE_B}/${encodeURIComponent(keys["node-ws"])}`);
  });

  after(async () => {
    ws.ws?.terminate();
    ws["node-ws"]?.terminate();
    await gw?.stop();
    await anvil?.stop();
  });

  const url = (t: "http" | "node-http") =>
    t === "http"
      ? `${gw.base}/eth/rpc?apikey=${keys.http}`
      : `${gw.base}/nodes/${NODE_A}/${encodeURIComponent(keys[t])}`;

  const unitsOf = (t: Transport, from: number) =>
    usage
      .slice(from)
      .filter(owner[t])
      .reduce((n, u) => n + (u.units ?? 1), 0);

  /** Sends one case's body on one transport; what came back and what was counted for it. */
  async function send(t: Transport, c: Case): Promise<Observed> {
    const u0 = usage.length;
    const l0 = log.length;
    const s0 = served.length;
    let answer: unknown;
    const o: Partial<Observed> = {};
    if (t === "http" || t === "node-http") {
      const res = await fetch(url(t), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: c.body,
      });
      const text = await res.text();
      answer = text === "" ? undefined : JSON.parse(text);
      o.status = res.status;
      o.xCache = res.headers.get("x-cache") ?? "";
      o.retryAfter = res.headers.has("retry-after");
      o.rateHeaders = res.headers.has("x-ratelimit-limit") && res.headers.has("x-ratelimit-remaining");
    } else {
      const client = ws[t];
      const before = client.messages.length;
      client.sendRaw(c.body);
      if (c.silentUnits !== undefined) {
        await eventually(() => unitsOf(t, u0) >= c.silentUnits!, `${t}: usage of "${c.name}"`);
      } else {
        await client.until(() => client.messages.length > before, 10_000, `${t}: answer to "${c.name}"`);
        answer = client.messages[before];
      }
    }
    const objects = (answer === undefined ? [] : Array.isArray(answer) ? answer : [answer]) as {
      id: unknown;
      result?: unknown;
      error?: { code: number; message: string; data?: Record<string, unknown> };
    }[];
    const errors = new Set<string>();
    const results: string[] = [];
    for (const x of objects) {
      if (x.error !== undefined) errors.add(JSON.stringify(errorShape(x.error)));
      else results.push(JSON.stringify([x.id, x.result]));
    }
    const usageMap: Record<string, number> = {};
    for (const r of usage.slice(u0).filter(owner[t])) {
      const k = `${r.method} ${r.category}`;
      usageMap[k] = (usageMap[k] ?? 0) + (r.units ?? 1);
    }
    return {
      ...o,
      errors: [...errors].sort(),
      results: results.sort(),
      usage: usageMap,
      served: served
        .slice(s0)
        .filter((s) => s.id === servedId[t])
        .reduce((n, s) => n + s.units, 0),
      log: log
        .slice(l0)
        .filter(owner[t])
        .map((r) => `${r.item} ${r.method} ${r.category} ${r.reason}`)
        .sort(),
    };
  }

  for (const c of CASES) {
    it(`${c.name}: the same error objects, usage, quota units and request-log rows on every transport`, async () => {
      const row = {} as Record<Transport, Observed>;
      for (const t of TRANSPORTS) {
        for (let i = 0; i < (c.warm ?? 0); i++) await send(t, c);
        row[t] = await send(t, c);
      }
      table[c.name] = row;
      const pick = (o: Observed) => ({
        errors: o.errors,
        results: o.results,
        usage: o.usage,
        served: o.served,
        log: o.log,
      });
      for (const t of TRANSPORTS.slice(1)) {
        const [a, b] = [pick(row.http), pick(row[t])];
        if (c.name.includes("blocked")) {
          // A blocked method's message says why for its endpoint (shared node's policy / Safe mode).
          a.errors = a.errors.map(withoutMessage);
          b.errors = b.errors.map(withoutMessage);
        }
        assert.deepEqual(b, a, `${t} differs from http`);
      }
      // The headers HTTP and the node's HTTP have in common.
      const h = (o: Observed) => ({
        status: o.status,
        xCache: o.xCache,
        retryAfter: o.retryAfter,
        rateHeaders: o.rateHeaders,
      });
      assert.deepEqual(h(row["node-http"]), h(row.http), "node HTTP headers differ from http");
      // Every request object of the case is in usage, whatever the transport.
      assert.ok(Object.keys(row.http.usage).length > 0, "nothing counted");
    });
  }

  it("the cases answer as the contract says (spot checks), and the parity table", () => {
    const http = (name: string) => table[name]!.http;
    assert.equal(http("cache hit").xCache, "HIT");
    assert.equal(http("notification").status, 204);
    assert.equal(http("notification").served, 0);
    assert.equal(http("batch with a notification").served, 1);
    assert.equal(http("parse error").status, 400);
    assert.equal(http("over the per-second limit").status, 429);
    assert.equal(http("over the per-second limit").retryAfter, true);
    assert.equal(http("over the per-second limit").served, 0);
    assert.equal(http("blocked method").status, 200);
    assert.deepEqual(http("batch").served, 3);
    assert.equal(http("node error passed through").errors.length, 1, "the node's error object");
    // The table, to quote (docs/architecture.md "Parity of the transports").
    const cell = (o: Observed) => {
      const err = o.errors
        .map((e) => JSON.parse(e) as { reason?: string; code: number })
        .map((e) => e.reason ?? `node ${e.code}`)
        .join("+");
      const units = Object.values(o.usage).reduce((n, x) => n + x, 0);
      const head = o.status === undefined ? "" : `${o.status}${o.xCache ? ` ${o.xCache}` : ""} `;
      return `${head}${err || "ok"} u${units} q${o.served} l${o.log.length}`;
    };
    const lines = [
      `| case | ${TRANSPORTS.join(" | ")} |`,
      `| --- | ${TRANSPORTS.map(() => "---").join(" | ")} |`,
      ...CASES.map((c) => `| ${c.name} | ${TRANSPORTS.map((t) => cell(table[c.name]![t])).join(" | ")} |`),
    ];
    console.log(
      `\n      parity (u: usage units, q: quota units, l: request-log rows):\n      ${lines.join("\n      ")}\n`,
    );
  });
});

function withoutMessage(e: string): string {
  const { message: _m, ...rest } = JSON.parse(e) as Record<string, unknown>;
  return JSON.stringify(rest);
}
