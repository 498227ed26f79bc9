import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { load } from "js-yaml";
import { RedisNames } from "../../../shared/src/redis/keys";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { createTestDatabase, type TestDatabase } from "../../helpers/postgres";
import { type StartedProcess, startProcess } from "../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { StubUpstream } from "../data-plane/stub-upstream";

const ROOT = resolve(__dirname, "../../../..");
const DATA_PLANE = resolve(ROOT, "dist/data-plane/src/main.js");
const CONTROL_PLANE = resolve(ROOT, "dist/control-plane/src/main.js");
const WORKER = resolve(ROOT, "dist/control-plane/src/worker/main.js");
const DASHBOARD = resolve(ROOT, "deploy/observability/grafana/gateway.json");
const RULES = resolve(ROOT, "deploy/observability/prometheus/rules.yml");
const PROMETHEUS_RULE = resolve(ROOT, "deploy/kubernetes/base/prometheusrule.yaml");

/** Series names the gateway's processes write (prom-client's runtime ones included). */
const METRIC_RE = /\b((?:rpcgw|gateway|nodejs|process)_[a-zA-Z0-9_]+)\b/g;

function metricNames(expr: string): string[] {
  return [...expr.matchAll(METRIC_RE)].map((m) => m[1]!);
}

/** Every PromQL expression of the dashboard: panel targets and template variable queries. */
function dashboardExprs(): string[] {
  const d = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { query?: unknown; definition?: string }[] };
  };
  const out: string[] = [];
  for (const p of d.panels) for (const t of p.targets ?? []) out.push(t.expr);
  for (const v of d.templating.list) if (v.definition !== undefined) out.push(v.definition);
  return out;
}

interface RuleFile {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string; for?: string }[] }[];
}

function ruleExprs(file: RuleFile): string[] {
  return file.groups.flatMap((g) => g.rules.map((r) => r.expr));
}

/**
 * The names a /metrics text declares (`# TYPE`), with a histogram's and a summary's sample series
 * (`_bucket`, `_sum`, `_count`), and the labels sets of its samples by name.
 */
function exposition(text: string): { names: Set<string>; samples: Map<string, string[]> } {
  const names = new Set<string>();
  const samples = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) {
      names.add(type[1]!);
      if (type[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(type[1]! + s);
      if (type[2] === "summary") for (const s of ["_sum", "_count"]) names.add(type[1]! + s);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? /.exec(line);
    if (sample !== null) {
      const list = samples.get(sample[1]!) ?? [];
      list.push(sample[2] ?? "");
      samples.set(sample[1]!, list);
    }
  }
  return { names, samples };
}

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

/** A value of `name` whose labels text includes `labels`, else undefined. */
function sampleValue(text: string, name: string, labels: string): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!line.includes(labels)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

/**
 * The shipped dashboard and alert rules (deploy/observability) against the running stack: the data plane
 * (two serving threads), the control plane and the worker, each started as its own process and scraped on
 * its own metrics port; and the rules' syntax, by promtool (Debian's prometheus package; .ci/run installs it).
 */
describe("observability: the dashboard and the alert rules name only series the processes expose", function () {
  this.timeout(120_000);
  let stub: StubUpstream;
  let dpNs: TestRedisNamespace;
  let cpNs: TestRedisNamespace;
  let db: TestDatabase;
  const procs: StartedProcess[] = [];
  const ports = {
    dataPlane: 0,
    dataPlaneMetrics: 0,
    controlPlane: 0,
    controlPlaneMetrics: 0,
    workerMetrics: 0,
  };
  let key = "";

  before(async () => {
    stub = await new StubUpstream().start();
    dpNs = createTestRedisNamespace();
    cpNs = createTestRedisNamespace();
    db = await createTestDatabase();
    // The data plane reads a seeded network; the control plane and the worker run on their own prefix
    // and database (their republication would replace the seeded records).
    const seeder = new RedisSeeder(dpNs.prefix, dpNs.redis);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
    key = await seeder.putKey();
    await seeder.close();
    for (const k of Object.keys(ports) as (keyof typeof ports)[]) ports[k] = await freePort();
    const cpEnv = {
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: cpNs.prefix,
      CONTROL_PLANE_PORT: String(ports.controlPlane),
      CONTROL_PLANE_HOST: "127.0.0.1",
      CONTROL_PLANE_METRICS_PORT: String(ports.controlPlaneMetrics),
      WORKER_METRICS_PORT: String(ports.workerMetrics),
      ADMIN_TOKEN: "observability-admin-token-0123456789",
      KEY_ENCRYPTION_SECRET: "observability-key-encryption-secret",
      LOG_LEVEL: "info",
    };
    procs.push(
      await startProcess(process.execPath, [DATA_PLANE], {
        env: {
          DATA_PLANE_THREADS: "2",
          DATA_PLANE_PORT: String(ports.dataPlane),
          DATA_PLANE_HOST: "127.0.0.1",
          METRICS_PORT: String(ports.dataPlaneMetrics),
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: dpNs.prefix,
          LOG_LEVEL: "error",
          SHUTDOWN_LINGER_MS: "0",
          UPSTREAM_STATE_PROBE_INTERVAL_MS: "0",
        },
        ready: async () => (await fetch(`http://127.0.0.1:${ports.dataPlane}/readyz`)).status === 200,
        timeoutMs: 45_000,
      }),
    );
    procs.push(
      await startProcess(process.execPath, [CONTROL_PLANE], {
        env: cpEnv,
        readyLine: /metrics listening/,
        timeoutMs: 60_000,
      }),
    );
    procs.push(
      await startProcess(process.execPath, [WORKER], {
        env: cpEnv,
        readyLine: /metrics listening/,
        timeoutMs: 60_000,
      }),
    );
  });

  after(async () => {
    for (const p of procs.reverse()) await p.stop();
    await stub?.stop();
    await dpNs?.cleanup();
    await cpNs?.cleanup();
    await db?.drop();
  });

  it("every series named in the dashboard and the rules is on some process's /metrics", async () => {
    // Traffic first, so that the per-request series have samples too.
    const res = await fetch(`http://127.0.0.1:${ports.dataPlane}/eth/rpc?apikey=${key}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
    });
    assert.equal(res.status, 200, await res.text());
    const gql = await fetch(`http://127.0.0.1:${ports.controlPlane}/graphql`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: "Bearer observability-admin-token-0123456789",
      },
      body: JSON.stringify({ query: "{ networks { slug } }" }),
    });
    assert.equal(gql.status, 200, await gql.text());
    const texts = {
      "data plane": await scrape(ports.dataPlaneMetrics),
      "control plane": await scrape(ports.controlPlaneMetrics),
      worker: await scrape(ports.workerMetrics),
    };
    const exposed = new Set<string>();
    for (const t of Object.values(texts)) for (const n of exposition(t).names) exposed.add(n);
    const rules = load(readFileSync(RULES, "utf8")) as RuleFile;
    const named = new Map<string, string>();
    for (const e of dashboardExprs()) for (const n of metricNames(e)) named.set(n, "the dashboard");
    for (const e of ruleExprs(rules)) for (const n of metricNames(e)) named.set(n, "the rules");
    assert.ok(named.size > 30, `only ${named.size} names found: is the extraction broken?`);
    const missing = [...named].filter(([n]) => !exposed.has(n)).map(([n, where]) => `${n} (${where})`);
    assert.deepEqual(missing, [], "named but not exposed by any process");
    // Runtime series in every process; the data plane's per thread too.
    for (const [process, text] of Object.entries(texts)) {
      const { names } = exposition(text);
      for (const n of [
        "process_resident_memory_bytes",
        "nodejs_eventloop_lag_p99_seconds",
        "nodejs_gc_duration_seconds",
      ])
        assert.ok(names.has(n), `${process}: no ${n}`);
    }
    const dp = exposition(texts["data plane"]);
    for (const thread of ["1", "2"])
      assert.ok(
        dp.samples.get("nodejs_heap_size_used_bytes")?.some((l) => l.includes(`thread="${thread}"`)),
        `the data plane's heap series of thread ${thread}`,
      );
    assert.equal(
      dp.samples.get("process_resident_memory_bytes")?.length,
      1,
      "process-wide series once per process, not once per thread",
    );
    // What was just served shows under its method, and the GraphQL query under its root field.
    assert.equal(
      sampleValue(texts["data plane"], "rpcgw_method_duration_seconds_count", 'method="eth_chainId"'),
      1,
    );
    assert.equal(
      sampleValue(
        texts["control plane"],
        "rpcgw_graphql_requests_total",
        'operation_type="query",operation="networks"',
      ),
      1,
    );
  });

  it("the worker's gauges read Redis at scrape time: a dead letter shows, and every queue's depth", async () => {
    const names = new RedisNames(cpNs.prefix);
    const client = cpNs.redis.client();
    try {
      await client.xadd(names.deadLetterStream(names.requestLogStream()), "*", "deadError", "test");
      const text = await eventually(async () => {
        const t = await scrape(ports.workerMetrics);
        return sampleValue(t, "rpcgw_worker_dead_letter_entries", 'stream="request-log"') === 1
          ? t
          : undefined;
      }, "the dead letter counted");
      assert.equal(sampleValue(text, "rpcgw_worker_dead_letter_entries", 'stream="usage"'), 0);
      for (const queue of ["publication", "usage", "nodes", "webhooks"])
        assert.notEqual(
          sampleValue(text, "rpcgw_worker_queue_jobs", `queue="${queue}",state="waiting"`),
          undefined,
          `queue ${queue} depth`,
        );
      assert.equal(sampleValue(text, "rpcgw_worker_stream_lag_entries", 'stream="usage"'), 0);
    } finally {
      await client.quit();
    }
  });

  it("a GraphQL request that fails validation is counted as an error of an invalid operation", async () => {
    const res = await fetch(`http://127.0.0.1:${ports.controlPlane}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ noSuchField }" }),
    });
    assert.equal(res.status, 400, await res.text());
    const text = await scrape(ports.controlPlaneMetrics);
    assert.equal(
      sampleValue(
        text,
        "rpcgw_graphql_errors_total",
        'operation_type="unknown",operation="invalid",code="GRAPHQL_VALIDATION_FAILED"',
      ),
      1,
    );
  });
});

describe("observability: the alert rules parse", () => {
  it("rules.yml and the PrometheusRule hold the same groups, each rule well formed", () => {
    const rules = load(readFileSync(RULES, "utf8")) as RuleFile;
    const cr = load(readFileSync(PROMETHEUS_RULE, "utf8")) as { kind: string; spec: RuleFile };
    assert.equal(cr.kind, "PrometheusRule");
    assert.deepEqual(cr.spec.groups, rules.groups, "prometheusrule.yaml differs from rules.yml");
    const alerts = new Set<string>();
    for (const g of rules.groups) {
      assert.ok(g.name && g.rules.length > 0, `group ${g.name}`);
      for (const r of g.rules) {
        assert.ok(r.alert !== undefined, `${g.name}: a rule without alert`);
        assert.ok(!alerts.has(r.alert), `alert ${r.alert} twice`);
        alerts.add(r.alert);
        assert.ok(typeof r.expr === "string" && r.expr.trim() !== "", `${r.alert}: no expr`);
        if (r.for !== undefined) assert.match(r.for, /^\d+[smh]$/, `${r.alert}: for`);
      }
    }
    // The alerts the issue asks for.
    for (const a of [
      "RpcGatewayUpstreamDown",
      "RpcGatewayNetworkAllUpstreamsLagging",
      "RpcGatewayErrorRateSpike",
      "RpcGatewayIngestionLagging",
      "RpcGatewayDeadLetters",
      "RpcGatewayQuotaStoreUnreachable",
    ])
      assert.ok(alerts.has(a), `no ${a}`);
  });

  it("promtool check rules accepts rules.yml and the PrometheusRule's groups", () => {
    const which = spawnSync("sh", ["-c", "command -v promtool"], { encoding: "utf8" });
    assert.equal(which.status, 0, "promtool not found: install Debian's prometheus package (.ci/run does)");
    const dir = mkdtempSync(join(tmpdir(), "rules-"));
    try {
      const cr = load(readFileSync(PROMETHEUS_RULE, "utf8")) as { spec: RuleFile };
      const fromCr = join(dir, "prometheusrule.yml");
      writeFileSync(fromCr, JSON.stringify(cr.spec));
      const r = spawnSync("promtool", ["check", "rules", RULES, fromCr], { encoding: "utf8" });
      assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /SUCCESS: \d+ rules found/);
      // And it does reject a broken expression (the check is not vacuous).
      const broken = join(dir, "broken.yml");
      writeFileSync(
        broken,
        JSON.stringify({
          groups: [{ name: "g", rules: [{ alert: "A", expr: "sum(rate(rpcgw_requests_total[5m])" }] }],
        }),
      );
      assert.notEqual(spawnSync("promtool", ["check", "rules", broken], { encoding: "utf8" }).status, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
