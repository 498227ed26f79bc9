import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { freePort } from "../../helpers/ports";
import { createTestDatabase, type TestDatabase } from "../../helpers/postgres";
import { type StartedProcess, startProcess } from "../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { StubUpstream } from "../data-plane/stub-upstream";
import { postFresh } from "../data-plane/threads/fixture";
import { TestWsClient } from "../data-plane/ws/ws-client";
import { OtlpReceiver, type ReceivedSpan } from "./otlp-receiver";

const ROOT = resolve(__dirname, "../../../..");
const DATA_PLANE = resolve(ROOT, "dist/data-plane/src/main.js");
const CONTROL_PLANE = resolve(ROOT, "dist/control-plane/src/main.js");
const WORKER = resolve(ROOT, "dist/control-plane/src/worker/main.js");

/** OTEL_* of a process exporting to `receiver` over OTLP/HTTP JSON, flushing every 100 ms. */
function otelEnv(receiver: OtlpReceiver): Record<string, string> {
  return {
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  };
}

/** The test process's own OTEL_* must not leak into the processes it starts. */
function withoutOtel(): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) out[k] = undefined;
  return out;
}

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const UNSAMPLED_TRACE = "0af7651916cd43dd8448eb211c80319c";
const WS_TRACE = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
const NODE_TRACE = "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b";
const NODE_WS_TRACE = "7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c";
const NODE_ID = "3f1e2d4c-5b6a-4789-8abc-def012345678";

async function startPlane(
  prefix: string,
  env: Record<string, string>,
): Promise<{ proc: StartedProcess; port: number }> {
  const port = await freePort();
  const proc = await startProcess(process.execPath, [DATA_PLANE], {
    env: {
      ...withoutOtel(),
      // Two threads: each runs its own SDK, and fresh connections land on either.
      DATA_PLANE_THREADS: "2",
      DATA_PLANE_PORT: String(port),
      DATA_PLANE_HOST: "127.0.0.1",
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      LOG_LEVEL: "error",
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
      SHUTDOWN_LINGER_MS: "0",
      UPSTREAM_STATE_PROBE_INTERVAL_MS: "0",
      ...env,
    } as Record<string, string>,
    ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
    timeoutMs: 30_000,
  });
  return { proc, port };
}

/**
 * OpenTelemetry traces (issue 15 §5; shared/src/telemetry, data-plane/src/telemetry): real processes
 * export over OTLP/HTTP to a receiver on loopback.
 */
describe("traces", function () {
  this.timeout(120_000);
  let receiver: OtlpReceiver;
  let stub: StubUpstream;
  let ns: TestRedisNamespace;
  let key = "";
  let nodeKey = "";

  before(async () => {
    receiver = await new OtlpReceiver().start();
    stub = await new StubUpstream().start();
    ns = createTestRedisNamespace();
    const seeder = new RedisSeeder(ns.prefix, ns.redis);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
    key = await seeder.putKey();
    // A dedicated node served by the same stub, and its own key.
    nodeKey = await seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "UNSAFE" });
    const client = ns.redis.client();
    await client.set(
      seeder.names.node(NODE_ID),
      JSON.stringify({
        nodeId: NODE_ID,
        workspaceId: "ws-traces",
        protocol: "EVM",
        httpUrl: stub.url,
        wsUrl: null,
        status: "SYNCED",
      }),
    );
    await client.quit();
    await seeder.close();
  });

  after(async () => {
    await receiver?.stop();
    await stub?.stop();
    await ns?.cleanup();
  });

  describe("data plane, tracing on", () => {
    let plane: { proc: StartedProcess; port: number };

    before(async () => {
      plane = await startPlane(ns.prefix, otelEnv(receiver));
    });

    after(async () => {
      const code = await plane?.proc.stop();
      assert.equal(code, 0, plane?.proc.output());
    });

    it("a keyed request is one trace: the request's span with key, limits, cache and upstream children", async () => {
      stub.reset();
      const a = await postFresh(plane.port, `/eth/rpc?apikey=${key}`, {
        jsonrpc: "2.0",
        id: 1,
        method: "eth_chainId",
      });
      assert.equal(a.status, 200, a.text);
      assert.equal(a.json.result, "0x7a69");
      const isRoot = (s: ReceivedSpan) =>
        s.name === "POST /{network}/rpc" && s.attributes["rpc.method"] === "eth_chainId";
      await receiver.waitFor((spans) => {
        const root = spans.find(isRoot);
        return root !== undefined && spans.filter((s) => s.traceId === root.traceId).length >= 5;
      });
      const root = receiver.spans.find(isRoot)!;
      assert.equal(root.service, "rpc-gateway-data-plane");
      assert.equal(root.parentSpanId, "", "a request without traceparent starts a trace");
      assert.equal(root.attributes["http.response.status_code"], 200);
      assert.equal(root.attributes["gateway.network"], "eth");
      assert.equal(root.attributes["rpc.system.name"], "jsonrpc");
      const trace = receiver.spans.filter((s) => s.traceId === root.traceId);
      const byName = new Map(trace.map((s) => [s.name, s]));
      for (const name of ["key.verify", "limits.admit", "cache.lookup", "upstream.call"]) {
        const child = byName.get(name);
        assert.ok(child, `${name} in ${[...byName.keys()].join(", ")}`);
        assert.equal(child.parentSpanId, root.spanId, `${name} is a child of the request's span`);
      }
      assert.equal(byName.get("cache.lookup")!.attributes["gateway.cache.hit"], false);
      assert.equal(byName.get("limits.admit")!.attributes["gateway.limits.admitted"], true);
      assert.equal(byName.get("upstream.call")!.attributes["rpc.system.name"], "jsonrpc");
      assert.equal(byName.get("upstream.call")!.attributes["gateway.category"], "Success");
      assert.equal(root.attributes["rpc.response.status_code"], undefined, "a result is no error");
      // The upstream got the upstream span's context.
      const sent = stub.traceparents.filter((t) => t.body.includes('"eth_chainId"'));
      assert.equal(sent.length, 1, JSON.stringify(stub.traceparents));
      assert.equal(sent[0]!.header, `00-${root.traceId}-${byName.get("upstream.call")!.spanId}-01`);
    });

    it("an incoming sampled traceparent is continued and forwarded", async () => {
      stub.reset();
      const a = await postFresh(
        plane.port,
        `/eth/rpc?apikey=${key}`,
        {
          jsonrpc: "2.0",
          id: 2,
          method: "stub_traced",
          params: ["x"],
        },
        { traceparent: `00-${TRACE}-${PARENT}-01` },
      );
      assert.equal(a.status, 200, a.text);
      await receiver.waitFor((spans) => spans.some((s) => s.traceId === TRACE && s.name === "upstream.call"));
      const root = receiver.spans.find((s) => s.traceId === TRACE && s.name === "POST /{network}/rpc")!;
      assert.ok(root, "the request's span is in the caller's trace");
      assert.equal(root.parentSpanId, PARENT);
      const upstream = receiver.spans.find((s) => s.traceId === TRACE && s.name === "upstream.call")!;
      assert.equal(upstream.parentSpanId, root.spanId);
      const sent = stub.traceparents.filter((t) => t.body.includes('"stub_traced"'));
      assert.equal(sent.length, 1);
      assert.equal(sent[0]!.header, `00-${TRACE}-${upstream.spanId}-01`);
    });

    it("sampled calls arriving together share a coalesced upstream batch: its traceparent names one of their spans, the others link to it", async () => {
      stub.reset();
      // Every request is sampled (parentbased_always_on); concurrent calls on one connection each (two
      // threads) arrive in the same event-loop turns, and their upstream calls are coalesced.
      const n = 48;
      const rs = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          postFresh(plane.port, `/eth/rpc?apikey=${key}`, {
            jsonrpc: "2.0",
            id: i,
            method: "stub_coalesced",
            params: [i],
          }),
        ),
      );
      for (const r of rs) assert.equal(r.status, 200, r.text);
      assert.equal(stub.count("stub_coalesced"), n);
      const isCall = (s: ReceivedSpan) =>
        s.name === "upstream.call" && s.attributes["rpc.method"] === "stub_coalesced";
      await receiver.waitFor((spans) => spans.filter(isCall).length === n);
      const calls = receiver.spans.filter(isCall);
      const sent = stub.traceparents.filter((t) => t.body.includes('"stub_coalesced"'));
      assert.ok(sent.length < n, `expected coalesced exchanges, got ${sent.length} for ${n} calls`);
      const batches = sent.filter((t) => t.body.startsWith("["));
      assert.ok(batches.length > 0, "at least one upstream batch");
      const byHeader = new Map(calls.map((s) => [`00-${s.traceId}-${s.spanId}-01`, s]));
      for (const b of batches) {
        const carrier = byHeader.get(b.header);
        assert.ok(carrier, `the batch's traceparent ${b.header} names a sampled call's upstream span`);
        const size = (b.body.match(/"stub_coalesced"/g) ?? []).length;
        assert.equal(carrier.attributes["gateway.coalesced_calls"], size);
        assert.deepEqual(carrier.links, [], "its own traceparent went out");
      }
      // Every other call of a batch says so and links to the span whose traceparent went out.
      const coalesced = calls.filter((s) => s.attributes["gateway.coalesced_calls"] !== undefined);
      const linked = coalesced.filter((s) => s.links.length === 1);
      assert.equal(coalesced.length - linked.length, batches.length, "one carrier per batch");
      for (const s of linked) {
        const to = s.links[0]!;
        assert.ok(
          batches.some((b) => b.header === `00-${to.traceId}-${to.spanId}-01`),
          "links to a batch's traceparent",
        );
        assert.notEqual(to.traceId, s.traceId, "another request's trace");
      }
      assert.equal(
        coalesced.reduce(
          (sum, s) => sum + (s.links.length === 0 ? Number(s.attributes["gateway.coalesced_calls"]) : 0),
          0,
        ),
        coalesced.length,
        "the batches' sizes add up to the coalesced calls",
      );
    });

    it("an incoming unsampled traceparent is not traced (parent-based) and nothing goes upstream", async () => {
      stub.reset();
      const a = await postFresh(
        plane.port,
        `/eth/rpc?apikey=${key}`,
        {
          jsonrpc: "2.0",
          id: 3,
          method: "stub_untraced",
        },
        { traceparent: `00-${UNSAMPLED_TRACE}-${PARENT}-00` },
      );
      assert.equal(a.status, 200, a.text);
      assert.equal(stub.count("stub_untraced"), 1);
      // A later sampled request's spans arrive after this one's would have: then there were none.
      await postFresh(plane.port, `/eth/rpc?apikey=${key}`, { jsonrpc: "2.0", id: 4, method: "stub_marker" });
      await receiver.waitFor((spans) => spans.some((s) => s.attributes["rpc.method"] === "stub_marker"));
      assert.equal(receiver.spans.filter((s) => s.traceId === UNSAMPLED_TRACE).length, 0);
      assert.equal(stub.traceparents.filter((t) => t.body.includes("stub_untraced")).length, 0);
    });
  });

  describe("data plane, tracing on: WebSocket and dedicated-node endpoints", () => {
    let plane: { proc: StartedProcess; port: number };
    const clients: TestWsClient[] = [];

    before(async () => {
      plane = await startPlane(ns.prefix, otelEnv(receiver));
    });

    after(async () => {
      for (const c of clients) c.terminate();
      const code = await plane?.proc.stop();
      assert.equal(code, 0, plane?.proc.output());
    });

    /** The spans of `traceId` once `root` and `children` are in, checked to hang off `root`. */
    async function linkedTrace(traceId: string, rootName: string, children: string[]): Promise<ReceivedSpan> {
      await receiver.waitFor((spans) => {
        const t = spans.filter((s) => s.traceId === traceId);
        return t.some((s) => s.name === rootName) && children.every((c) => t.some((s) => s.name === c));
      });
      const t = receiver.spans.filter((s) => s.traceId === traceId);
      const root = t.find((s) => s.name === rootName)!;
      assert.equal(root.parentSpanId, PARENT, "the caller's trace is continued");
      assert.equal(root.service, "rpc-gateway-data-plane");
      for (const name of children) {
        const child = t.find((s) => s.name === name)!;
        assert.equal(child.parentSpanId, root.spanId, `${name} is a child of ${rootName}`);
      }
      return root;
    }

    it("a WebSocket call is one trace under the upgrade's traceparent: limits, cache and upstream children", async () => {
      stub.reset();
      const c = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`, {
        traceparent: `00-${WS_TRACE}-${PARENT}-01`,
      });
      clients.push(c);
      // A fresh plane: eth_chainId (cacheable) is a miss in either thread's cache.
      const a = await c.call("eth_chainId");
      assert.equal(a.result, "0x7a69", JSON.stringify(a));
      const root = await linkedTrace(WS_TRACE, "WS /{network}/rpc", [
        "limits.admit",
        "cache.lookup",
        "upstream.call",
      ]);
      assert.equal(root.attributes["gateway.transport"], "ws");
      assert.equal(root.attributes["rpc.method"], "eth_chainId");
      assert.equal(root.attributes["gateway.category"], "Success");
      const upstream = receiver.spans.find((s) => s.traceId === WS_TRACE && s.name === "upstream.call")!;
      const sent = stub.traceparents.filter((t) => t.header.includes(WS_TRACE));
      assert.equal(sent.length, 1, JSON.stringify(stub.traceparents));
      assert.equal(sent[0]!.header, `00-${WS_TRACE}-${upstream.spanId}-01`);
    });

    it("a dedicated-node HTTP request is one trace: key check, limits, upstream children", async () => {
      stub.reset();
      const a = await postFresh(
        plane.port,
        `/nodes/${NODE_ID}/${encodeURIComponent(nodeKey)}`,
        { jsonrpc: "2.0", id: 7, method: "stub_node_http" },
        { traceparent: `00-${NODE_TRACE}-${PARENT}-01` },
      );
      assert.equal(a.status, 200, a.text);
      const root = await linkedTrace(NODE_TRACE, "POST /nodes/{nodeId}/{key}", [
        "key.verify",
        "limits.admit",
        "upstream.call",
      ]);
      assert.equal(root.attributes["gateway.network"], `node:${NODE_ID}`);
      assert.equal(root.attributes["http.response.status_code"], 200);
      const upstream = receiver.spans.find((s) => s.traceId === NODE_TRACE && s.name === "upstream.call")!;
      const sent = stub.traceparents.filter((t) => t.body.includes('"stub_node_http"'));
      assert.equal(sent.length, 1, JSON.stringify(stub.traceparents));
      assert.equal(sent[0]!.header, `00-${NODE_TRACE}-${upstream.spanId}-01`);
    });

    it("a dedicated-node WebSocket message is one trace too", async () => {
      stub.reset();
      const c = await TestWsClient.open(
        `ws://127.0.0.1:${plane.port}/nodes/${NODE_ID}/${encodeURIComponent(nodeKey)}`,
        {
          traceparent: `00-${NODE_WS_TRACE}-${PARENT}-01`,
        },
      );
      clients.push(c);
      const a = await c.call("stub_node_ws");
      assert.ok(a.result !== undefined, JSON.stringify(a));
      const root = await linkedTrace(NODE_WS_TRACE, "WS /nodes/{nodeId}/{key}", [
        "key.verify",
        "limits.admit",
        "upstream.call",
      ]);
      assert.equal(root.attributes["gateway.status"], 200);
      const sent = stub.traceparents.filter((t) => t.body.includes('"stub_node_ws"'));
      assert.equal(sent.length, 1, JSON.stringify(stub.traceparents));
      assert.ok(sent[0]!.header.startsWith(`00-${NODE_WS_TRACE}-`), sent[0]!.header);
    });
  });

  describe("data plane, invalid OTEL_*", () => {
    it("fails once in the main thread, before any thread starts, with the variable named", async () => {
      const r = spawnSync(process.execPath, [DATA_PLANE], {
        env: {
          ...withoutOtel(),
          PATH: process.env.PATH,
          DATA_PLANE_THREADS: "2",
          DATA_PLANE_PORT: String(await freePort()),
          DATA_PLANE_HOST: "127.0.0.1",
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: ns.prefix,
          OTEL_TRACES_EXPORTER: "otlp",
          OTEL_TRACES_SAMPLER: "sometimes",
        } as NodeJS.ProcessEnv,
        encoding: "utf8",
        timeout: 30_000,
      });
      assert.equal(r.status, 1, `${r.stdout}${r.stderr}`);
      const out = `${r.stdout}${r.stderr}`;
      assert.match(out, /OTEL_TRACES_SAMPLER: expected one of .*got "sometimes"/);
      assert.equal(out.split("OTEL_TRACES_SAMPLER:").length - 1, 1, `reported once:\n${out}`);
      assert.doesNotMatch(out, /listening/);
    });
  });

  describe("data plane, tracing off", () => {
    it("OTEL_SDK_DISABLED=true: nothing is exported and no traceparent goes upstream", async () => {
      const before = receiver.requests;
      const plane = await startPlane(ns.prefix, { ...otelEnv(receiver), OTEL_SDK_DISABLED: "true" });
      try {
        stub.reset();
        for (const tp of ["", `00-${TRACE}-${PARENT}-01`]) {
          const a = await postFresh(
            plane.port,
            `/eth/rpc?apikey=${key}`,
            {
              jsonrpc: "2.0",
              id: 5,
              method: "stub_off",
            },
            tp === "" ? {} : { traceparent: tp },
          );
          assert.equal(a.status, 200, a.text);
        }
        assert.equal(stub.count("stub_off"), 2);
      } finally {
        assert.equal(await plane.proc.stop(), 0, plane.proc.output());
      }
      // After the drain too (a shutdown flushes): nothing was sent.
      assert.equal(receiver.requests, before);
      assert.equal(stub.traceparents.length, 0);
    });
  });

  describe("control plane and worker", () => {
    let db: TestDatabase;
    let cpNs: TestRedisNamespace;

    before(async () => {
      db = await createTestDatabase();
      cpNs = createTestRedisNamespace();
    });

    after(async () => {
      await db?.drop();
      await cpNs?.cleanup();
    });

    function cpEnv(port = 0): Record<string, string> {
      return {
        ...(withoutOtel() as Record<string, string>),
        ...otelEnv(receiver),
        DATABASE_URL: db.url,
        REDIS_URL: TEST_REDIS_URL,
        REDIS_KEY_PREFIX: cpNs.prefix,
        CONTROL_PLANE_PORT: String(port),
        ADMIN_TOKEN: "traces-admin-token-0123456789abcdef",
        KEY_ENCRYPTION_SECRET: "traces-key-encryption-secret-0123",
        LOG_LEVEL: "info",
      };
    }

    it("a GraphQL request is one trace: the HTTP server span, the resolver and its pg queries", async () => {
      const port = await freePort();
      const cp = await startProcess(process.execPath, [CONTROL_PLANE], {
        env: cpEnv(port),
        ready: async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok,
        timeoutMs: 45_000,
      });
      try {
        const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
          method: "POST",
          headers: { "content-type": "application/json", traceparent: `00-${"1".repeat(32)}-${PARENT}-01` },
          body: JSON.stringify({ query: "{ networks { slug } }" }),
        });
        assert.equal(res.status, 200, await res.clone().text());
        const trace = "1".repeat(32);
        await receiver.waitFor((spans) => {
          const t = spans.filter((s) => s.traceId === trace);
          return (
            t.some((s) => s.name.startsWith("graphql.resolve")) &&
            t.some(
              (s) =>
                s.attributes["db.system"] === "postgresql" || s.attributes["db.system.name"] === "postgresql",
            )
          );
        });
        const spans = receiver.spans.filter((s) => s.traceId === trace);
        assert.ok(spans.every((s) => s.service === "rpc-gateway-control-plane"));
        const server = spans.find((s) => s.parentSpanId === PARENT);
        assert.ok(server, "the HTTP server span continues the caller's trace");
        assert.equal(server.kind, 2, "SERVER");
        const ids = new Set(spans.map((s) => s.spanId));
        for (const s of spans)
          if (s !== server) assert.ok(ids.has(s.parentSpanId), `${s.name} is linked in the trace`);
        const resolver = spans.find(
          (s) => s.name.startsWith("graphql.resolve") && s.attributes["graphql.field.name"] === "networks",
        );
        assert.ok(resolver, spans.map((s) => s.name).join(", "));
      } finally {
        assert.equal(await cp.stop(), 0, cp.output());
      }
    });

    it("a worker job is a span with its pg queries as children, and its log lines carry the trace id", async () => {
      const worker = await startProcess(process.execPath, [WORKER], {
        env: cpEnv(),
        readyLine: /re-published all records/,
        timeoutMs: 45_000,
      });
      try {
        await receiver.waitFor((spans) => {
          const job = spans.find((s) => s.name === "publication republish-all");
          return job !== undefined && spans.some((s) => s.parentSpanId === job.spanId);
        });
        const job = receiver.spans.find((s) => s.name === "publication republish-all")!;
        assert.equal(job.service, "rpc-gateway-worker");
        assert.equal(job.attributes["messaging.system"], "bullmq");
        const children = receiver.spans.filter((s) => s.parentSpanId === job.spanId);
        assert.ok(
          children.some(
            (s) =>
              s.name.startsWith("pg.") ||
              String(s.attributes["db.system"] ?? s.attributes["db.system.name"]) === "postgresql",
          ),
          children.map((s) => s.name).join(", "),
        );
        const line = worker
          .output()
          .split("\n")
          .find((l) => l.includes("re-published all records"));
        assert.ok(line, worker.output());
        const logged = JSON.parse(line);
        const ids = new Set(
          receiver.spans.filter((s) => s.name === "publication republish-all").map((s) => s.traceId),
        );
        assert.ok(ids.has(logged.trace_id), `log line ${line} carries a job's trace id`);
        assert.match(logged.span_id, /^[0-9a-f]{16}$/);
      } finally {
        assert.equal(await worker.stop(), 0, worker.output());
      }
    });
  });
});
