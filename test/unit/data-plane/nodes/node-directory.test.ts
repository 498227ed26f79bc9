import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { RedisNodeDirectory } from "../../../../data-plane/src/nodes/node-directory";
import { createLogger } from "../../../../shared/src/log/logger";
import { RedisNames } from "../../../../shared/src/redis/keys";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { PrivateRedis } from "../../../helpers/redis-server";

const NODE = "7c1f2b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b";
const rec = (status: string): NodeRecord => ({
  nodeId: NODE,
  workspaceId: "w1",
  protocol: "EVM",
  httpUrl: "http://127.0.0.1:18545",
  wsUrl: null,
  status,
});

describe("data-plane: RedisNodeDirectory on a private redis-server", function () {
  this.timeout(30_000);
  let server: PrivateRedis;
  let redis: Redis;
  let dir: RedisNodeDirectory;
  const names = new RedisNames("nd:");

  beforeEach(async () => {
    server = await new PrivateRedis().start();
    redis = new Redis(server.url);
    redis.on("error", () => {}); // the server is stopped on purpose in one test
    dir = new RedisNodeDirectory({
      url: server.url,
      prefix: "nd:",
      commandTimeoutMs: 200,
      ttlMs: 60_000,
      logger: createLogger("test", "silent"),
    });
    await redis.set(names.node(NODE), JSON.stringify(rec("SYNCED")));
  });

  afterEach(async () => {
    redis.disconnect();
    await dir.close();
    await server.stop();
  });

  it("revalidate: every record is read again before its next use", async () => {
    assert.equal((await dir.get(NODE))?.status, "SYNCED");
    await redis.set(names.node(NODE), JSON.stringify(rec("STOPPED"))); // its node.update was missed
    assert.equal((await dir.get(NODE))?.status, "SYNCED", "cached within its TTL");
    dir.revalidate();
    assert.equal((await dir.get(NODE))?.status, "STOPPED");
  });

  it("revalidate: a record that cannot be read is served as it was; after clear() the read fails", async () => {
    assert.equal((await dir.get(NODE))?.status, "SYNCED");
    dir.revalidate();
    await server.stop();
    assert.equal((await dir.get(NODE))?.status, "SYNCED");
    dir.clear();
    await assert.rejects(Promise.resolve(dir.get(NODE)));
  });
});
