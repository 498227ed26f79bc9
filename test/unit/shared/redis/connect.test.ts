import assert from "node:assert/strict";
import { Cluster, Redis } from "ioredis";
import { z } from "zod";
import { loadConfig, redisTarget } from "../../../../control-plane/src/config";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import { commonEnvShape, parseEnv } from "../../../../shared/src/config/env";
import { clusterNodeAuth, createRedis, isCluster } from "../../../../shared/src/redis/connect";

const common = z.object(commonEnvShape);

describe("shared/redis: REDIS_CLUSTER_NODES and createRedis", () => {
  it("parses host:port lists (IPv6 in brackets); empty = a single Redis", () => {
    assert.deepEqual(parseEnv(common, {}).REDIS_CLUSTER_NODES, []);
    assert.deepEqual(
      parseEnv(common, { REDIS_CLUSTER_NODES: " 10.0.0.1:7000, redis-1.internal:7001,[::1]:7002, " })
        .REDIS_CLUSTER_NODES,
      [
        { host: "10.0.0.1", port: 7000 },
        { host: "redis-1.internal", port: 7001 },
        { host: "::1", port: 7002 },
      ],
    );
  });

  it("refuses an entry without a port, a port out of range, or a URL, naming the variable and the entry", () => {
    for (const bad of ["10.0.0.1", "10.0.0.1:0", "h:70000", "redis://h:7000", "::1:7000", "h:7000;x"]) {
      assert.throws(
        () => parseEnv(common, { REDIS_CLUSTER_NODES: `127.0.0.1:7000,${bad}` }),
        (e: Error) => e.message.includes("REDIS_CLUSTER_NODES") && e.message.includes(`"${bad}"`),
        bad,
      );
    }
  });

  it("both planes' configs carry it", () => {
    const env = { REDIS_CLUSTER_NODES: "127.0.0.1:7000,127.0.0.1:7001" };
    const dp = loadDataPlaneConfig(env);
    assert.equal(dp.REDIS_CLUSTER_NODES.length, 2);
    const cp = loadConfig(env);
    assert.deepEqual(redisTarget(cp), {
      url: "redis://127.0.0.1:6379",
      clusterNodes: dp.REDIS_CLUSTER_NODES,
    });
  });

  it("makes a Redis for a single server and a Cluster for cluster nodes, with the purpose's options", async () => {
    const single = createRedis({ url: "redis://127.0.0.1:1" }, "dp-background", {
      name: "dp:limits",
      commandTimeoutMs: 700,
      lazyConnect: true,
    });
    const cluster = createRedis(
      { url: "rediss://user:p%40ss@ignored:1", clusterNodes: [{ host: "127.0.0.1", port: 1 }] },
      "dp-background",
      { name: "dp:limits", commandTimeoutMs: 700, lazyConnect: true },
    );
    try {
      assert.ok(single instanceof Redis && !isCluster(single));
      assert.equal(single.options.enableOfflineQueue, false);
      assert.equal(single.options.maxRetriesPerRequest, 0);
      assert.equal(single.options.connectionName, "dp:limits");
      assert.equal(single.options.commandTimeout, 700);
      assert.equal(single.options.port, 1);

      assert.ok(cluster instanceof Cluster && isCluster(cluster));
      assert.equal(cluster.options.enableOfflineQueue, false);
      assert.equal(cluster.options.lazyConnect, true);
      assert.equal(typeof cluster.options.clusterRetryStrategy, "function");
      const node = cluster.options.redisOptions!;
      assert.equal(node.maxRetriesPerRequest, 0);
      assert.equal(node.connectionName, "dp:limits");
      assert.equal(node.commandTimeout, 700);
      assert.equal(node.username, "user");
      assert.equal(node.password, "p@ss");
      assert.deepEqual(node.tls, {});
    } finally {
      single.disconnect();
      cluster.disconnect();
    }
  });

  it("takes no credentials or TLS from a plain URL", () => {
    assert.deepEqual(clusterNodeAuth("redis://127.0.0.1:6379"), {});
    assert.deepEqual(clusterNodeAuth("redis://:secret@h:1"), { password: "secret" });
  });
});
