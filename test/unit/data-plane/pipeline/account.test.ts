import assert from "node:assert/strict";
import type { VerifiedKey } from "../../../../data-plane/src/auth/key-verifier";
import type { LimitsGate } from "../../../../data-plane/src/limits/admission";
import { MethodWeights, UNIT_WEIGHTS } from "../../../../data-plane/src/limits/compute-units";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { countPushes, nodeUsageNetwork, RequestAccount } from "../../../../data-plane/src/pipeline/account";
import type { RequestLog } from "../../../../data-plane/src/requestlog/recorder";
import type { UsageContext, UsageRecorder } from "../../../../data-plane/src/usage";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import type { RequestLogRecord } from "../../../../shared/src/requestlog/contract";

const WS = "11111111-1111-4111-8111-111111111111";
const APP = "22222222-2222-4222-8222-222222222222";

/** Every sink the accounting writes to, capturing. `sample`: the draw for successes. */
function sinks(sample = true) {
  const usage: UsageContext[] = [];
  const logged: RequestLogRecord[] = [];
  const served: [string, number][] = [];
  const servedUnits: number[] = [];
  const requests: [string, string, number][] = [];
  let draws = 0;
  class CountingMetrics extends NoopMetrics {
    override request(network?: string, category?: string, _s?: number, count = 1): void {
      requests.push([network!, category!, count]);
    }
  }
  const metrics = new CountingMetrics();
  const u: UsageRecorder = {
    record: (c) => void usage.push(c),
    flush: async () => {},
    close: async () => {},
  };
  const log: RequestLog = {
    wants: (category) => {
      if (category !== ErrorCategory.Success) return true;
      draws++;
      return sample;
    },
    record: (r) => void logged.push({ ...r }),
    flush: async () => {},
    close: async () => {},
  };
  const limits = {
    recordServed: (k: VerifiedKey | undefined, units: number, computeUnits = 0) => {
      if (k !== undefined && k.record.kind !== "node") served.push([k.record.workspaceId, units]);
      servedUnits.push(computeUnits);
    },
  } as unknown as LimitsGate;
  return {
    s: { metrics, usage: u, requestLog: log, limits },
    usage,
    logged,
    served,
    servedUnits,
    requests,
    draws: () => draws,
  };
}

const appKey = { hash: "h", record: { kind: "app", workspaceId: WS, appId: APP } } as unknown as VerifiedKey;
const nodeKey = {
  hash: "n",
  record: { kind: "node", workspaceId: WS, appId: null, nodeId: "ABC-1" },
} as unknown as VerifiedKey;

describe("data-plane/pipeline/account", () => {
  it("count: metrics, one usage record per run with its units, log rows per element; successes drawn once per request", () => {
    const k = sinks(true);
    const a = new RequestAccount(k.s, "http", "r-1", "eth", "eth", performance.now());
    a.key = appKey;
    a.count("eth_call", ErrorCategory.Success, "", 0, 2);
    a.count("eth_chainId", ErrorCategory.Success, "", 2, 1);
    a.count("eth_call", ErrorCategory.NodeError, "upstream_timeout", 3, 1);
    assert.equal(k.draws(), 1, "one draw for the request's successes");
    assert.deepEqual(
      k.usage.map((u) => [u.workspaceId, u.appId, u.network, u.method, u.category, u.units]),
      [
        [WS, APP, "eth", "eth_call", "Success", 2],
        [WS, APP, "eth", "eth_chainId", "Success", 1],
        [WS, APP, "eth", "eth_call", "Node Error", 1],
      ],
    );
    assert.deepEqual(k.requests, [
      ["eth", "Success", 2],
      ["eth", "Success", 1],
      ["eth", "Node Error", 1],
    ]);
    assert.equal(k.logged.length, 0, "records wait for the answer's status");
    assert.ok(a.hasLogRows);
    a.logged(200, "127.0.0.0/24");
    assert.deepEqual(
      k.logged.map((r) => [
        r.item,
        r.method,
        r.category,
        r.reason,
        r.httpStatus,
        r.clientIp,
        r.transport,
        r.requestId,
      ]),
      [
        [0, "eth_call", "Success", "", 200, "127.0.0.0/24", "http", "r-1"],
        [1, "eth_call", "Success", "", 200, "127.0.0.0/24", "http", "r-1"],
        [2, "eth_chainId", "Success", "", 200, "127.0.0.0/24", "http", "r-1"],
        [3, "eth_call", "Node Error", "upstream_timeout", 200, "127.0.0.0/24", "http", "r-1"],
      ],
    );
    assert.equal(a.hasLogRows, false);
  });

  it("compute units: usage records carry weight x units, log rows each object's weight, served the message's", () => {
    const k = sinks(true);
    const a = new RequestAccount(k.s, "http", "r-cu", "eth", "eth", performance.now());
    a.key = appKey;
    a.weights = new MethodWeights({ defaultUnits: 20, methods: { eth_call: 26, eth_chainId: 0 } });
    a.count("eth_call", ErrorCategory.Success, "", 0, 2);
    a.count("eth_chainId", ErrorCategory.Success, "", 2, 1);
    a.count("net_peerCount", ErrorCategory.Success, "", 3, 1);
    assert.deepEqual(
      k.usage.map((u) => [u.method, u.units, u.computeUnits]),
      [
        ["eth_call", 2, 52],
        ["eth_chainId", 1, 0],
        ["net_peerCount", 1, 20],
      ],
    );
    a.logged(200, null);
    assert.deepEqual(
      k.logged.map((r) => r.computeUnits),
      [26, 26, 0, 20],
    );
    a.computeUnits = 72;
    a.served(4);
    assert.deepEqual(k.servedUnits, [72]);
  });

  it("an unsampled success allocates no row; errors are still logged", () => {
    const k = sinks(false);
    const a = new RequestAccount(k.s, "ws", "r-2", "eth", "eth", performance.now());
    a.count("eth_call", ErrorCategory.Success);
    assert.equal(a.hasLogRows, false);
    a.count("eth_call", ErrorCategory.ClientError, "parse_error");
    a.logged(0, null);
    assert.deepEqual(
      k.logged.map((r) => [r.category, r.httpStatus, r.workspaceId, r.transport]),
      [["Client Error", 0, null, "ws"]],
    );
  });

  it("served: response units against the key's quota; none without a key", () => {
    const k = sinks();
    const a = new RequestAccount(k.s, "http", "r-3", "eth", "eth", performance.now());
    a.served(3);
    a.key = appKey;
    a.served(2);
    assert.deepEqual(k.served, [[WS, 2]]);
  });

  it("a dedicated node: usage under node-{id}, no request metrics series", () => {
    const k = sinks();
    const a = new RequestAccount(k.s, "node", "r-4", nodeUsageNetwork("ABC-1"), "", performance.now());
    a.key = nodeKey;
    a.count("eth_chainId", ErrorCategory.Success);
    assert.deepEqual(k.requests, []);
    assert.deepEqual(
      k.usage.map((u) => [u.workspaceId, u.appId, u.network]),
      [[WS, null, "node-abc-1"]],
    );
  });

  it("countPushes: notifications as Success units for the key (quota too), public under no workspace, custom endpoints skipped", () => {
    const k = sinks();
    countPushes(k.s, appKey, "eth", "eth_subscription", 3, UNIT_WEIGHTS);
    countPushes(k.s, undefined, "eth", "eth_subscription", 1, UNIT_WEIGHTS);
    countPushes(k.s, appKey, "", "eth_subscription", 1, UNIT_WEIGHTS);
    assert.deepEqual(
      k.usage.map((u) => [u.workspaceId, u.method, u.category, u.latencyMs, u.units]),
      [
        [WS, "eth_subscription", "Success", 0, 3],
        [null, "eth_subscription", "Success", 0, 1],
      ],
    );
    assert.deepEqual(k.served, [[WS, 3]]);
  });

  it("countPushes: each event costs its notification method's weight, in the usage rows and against the compute-unit quota", () => {
    const k = sinks();
    const weights = new MethodWeights({ defaultUnits: 20, methods: { eth_subscription: 40 } });
    countPushes(k.s, appKey, "eth", "eth_subscription", 3, weights);
    countPushes(k.s, appKey, "dot", "chain_newHead", 2, weights);
    assert.deepEqual(
      k.usage.map((u) => [u.method, u.units, u.computeUnits]),
      [
        ["eth_subscription", 3, 120],
        ["chain_newHead", 2, 40],
      ],
    );
    assert.deepEqual(k.servedUnits, [120, 40]);
  });
});
