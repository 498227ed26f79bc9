import assert from "node:assert/strict";
import { maxLogsBlockRange, NetworkRecordSchema } from "../../../../shared/src/redis/records";
import { ADMIN_TOKEN, code, type Harness, startHarness } from "../harness";

const CREATE = `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { slug maxLogsBlockRange } }`;
const UPDATE = `mutation($s: String!, $i: UpdateNetworkInput!) { updateNetwork(slug: $s, input: $i) { slug name allowDebug maxLogsBlockRange } }`;

describe("control-plane: a network's eth_getLogs block range (maxLogsBlockRange)", () => {
  let h: Harness;
  let user: { token: string; workspaceId: string };
  before(async () => {
    h = await startHarness();
    user = await h.signUp();
  });
  after(async () => {
    await h?.close();
  });

  const published = async (slug: string) =>
    NetworkRecordSchema.parse(JSON.parse((await h.redis.hget(h.names.networks(), slug))!));

  it("defaults to 10000, is set on create and by updateNetwork (operator only), and is published", async () => {
    const d = await h.ok(
      CREATE,
      { i: { slug: "logs-default", name: "D", protocol: "EVM", chainId: 1 } },
      ADMIN_TOKEN,
    );
    assert.equal(d.createNetwork.maxLogsBlockRange, 10_000);
    assert.equal((await published("logs-default")).maxLogsBlockRange, 10_000);

    const c = await h.ok(
      CREATE,
      { i: { slug: "logs-set", name: "S", protocol: "EVM", chainId: 1, maxLogsBlockRange: 500 } },
      ADMIN_TOKEN,
    );
    assert.equal(c.createNetwork.maxLogsBlockRange, 500);
    assert.equal((await published("logs-set")).maxLogsBlockRange, 500);

    assert.equal(
      code(await h.gql(UPDATE, { s: "logs-set", i: { maxLogsBlockRange: 5 } }, user.token)),
      "FORBIDDEN",
    );
    assert.equal(
      code(await h.gql(UPDATE, { s: "logs-set", i: { maxLogsBlockRange: 5 } })),
      "UNAUTHENTICATED",
    );
    assert.equal((await published("logs-set")).maxLogsBlockRange, 500);

    const u = await h.ok(UPDATE, { s: "logs-set", i: { maxLogsBlockRange: 0 } }, ADMIN_TOKEN);
    // Fields left out keep their values.
    assert.deepEqual(u.updateNetwork, {
      slug: "logs-set",
      name: "S",
      allowDebug: false,
      maxLogsBlockRange: 0,
    });
    assert.equal((await published("logs-set")).maxLogsBlockRange, 0);
    const r = await h.ok(UPDATE, { s: "logs-set", i: { name: "Renamed", allowDebug: true } }, ADMIN_TOKEN);
    assert.deepEqual(r.updateNetwork, {
      slug: "logs-set",
      name: "Renamed",
      allowDebug: true,
      maxLogsBlockRange: 0,
    });
    const rec = await published("logs-set");
    assert.equal(rec.allowDebug, true);
    assert.equal(rec.name, "Renamed");
  });

  it("refuses negative or absurd ranges and unknown networks", async () => {
    for (const v of [-1, 2_000_000_000]) {
      const bad = await h.gql(UPDATE, { s: "logs-default", i: { maxLogsBlockRange: v } }, ADMIN_TOKEN);
      assert.equal(bad.errors?.[0]?.extensions?.field, "maxLogsBlockRange", JSON.stringify(bad));
      const badCreate = await h.gql(
        CREATE,
        {
          i: { slug: `logs-bad-${v < 0 ? "neg" : "big"}`, name: "B", protocol: "EVM", maxLogsBlockRange: v },
        },
        ADMIN_TOKEN,
      );
      assert.equal(badCreate.errors?.[0]?.extensions?.field, "maxLogsBlockRange", JSON.stringify(badCreate));
    }
    assert.equal((await published("logs-default")).maxLogsBlockRange, 10_000);
    assert.equal(
      code(await h.gql(UPDATE, { s: "nope", i: { maxLogsBlockRange: 1 } }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );
  });

  it("a record published without the field (older control plane) parses, and the data plane uses the default", () => {
    const old = NetworkRecordSchema.parse({
      slug: "x",
      name: "x",
      protocol: "EVM",
      chainId: 1,
      allowDebug: false,
      upstreams: [],
    });
    assert.equal(old.maxLogsBlockRange, undefined);
    assert.equal(maxLogsBlockRange(old), 10_000);
    assert.equal(maxLogsBlockRange({ ...old, maxLogsBlockRange: 0 }), 0);
  });
});
