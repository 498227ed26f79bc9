import assert from "node:assert/strict";
import { logsChunkBlocks, NetworkRecordSchema } from "../../../../shared/src/redis/records";
import { ADMIN_TOKEN, code, type Harness, startHarness } from "../harness";

const CREATE = `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { slug logsChunkBlocks maxLogsBlockRange } }`;
const UPDATE = `mutation($s: String!, $i: UpdateNetworkInput!) { updateNetwork(slug: $s, input: $i) { slug name maxLogsBlockRange logsChunkBlocks } }`;
const LIST = `{ networks { slug logsChunkBlocks } }`;

describe("control-plane: a network's eth_getLogs chunk size (logsChunkBlocks)", () => {
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

  it("defaults to 2000, is set on create and by updateNetwork (operator only), shown in networks, and published", async () => {
    const d = await h.ok(CREATE, { i: { slug: "chunk-default", name: "D", protocol: "EVM" } }, ADMIN_TOKEN);
    assert.equal(d.createNetwork.logsChunkBlocks, 2_000);
    assert.equal((await published("chunk-default")).logsChunkBlocks, 2_000);

    const c = await h.ok(
      CREATE,
      {
        i: { slug: "chunk-set", name: "S", protocol: "EVM", logsChunkBlocks: 500, maxLogsBlockRange: 50_000 },
      },
      ADMIN_TOKEN,
    );
    assert.deepEqual(c.createNetwork, { slug: "chunk-set", logsChunkBlocks: 500, maxLogsBlockRange: 50_000 });
    const rec = await published("chunk-set");
    assert.equal(rec.logsChunkBlocks, 500);
    assert.equal(rec.maxLogsBlockRange, 50_000);

    assert.equal(
      code(await h.gql(UPDATE, { s: "chunk-set", i: { logsChunkBlocks: 5 } }, user.token)),
      "FORBIDDEN",
    );
    assert.equal(code(await h.gql(UPDATE, { s: "chunk-set", i: { logsChunkBlocks: 5 } })), "UNAUTHENTICATED");
    assert.equal((await published("chunk-set")).logsChunkBlocks, 500);

    const off = await h.ok(UPDATE, { s: "chunk-set", i: { logsChunkBlocks: 0 } }, ADMIN_TOKEN);
    // Fields left out keep their values.
    assert.deepEqual(off.updateNetwork, {
      slug: "chunk-set",
      name: "S",
      maxLogsBlockRange: 50_000,
      logsChunkBlocks: 0,
    });
    assert.equal((await published("chunk-set")).logsChunkBlocks, 0);
    const renamed = await h.ok(
      UPDATE,
      { s: "chunk-set", i: { name: "R", maxLogsBlockRange: 7 } },
      ADMIN_TOKEN,
    );
    assert.equal(renamed.updateNetwork.logsChunkBlocks, 0, "kept when left out");
    const back = await h.ok(UPDATE, { s: "chunk-set", i: { logsChunkBlocks: 3000 } }, ADMIN_TOKEN);
    assert.equal(back.updateNetwork.logsChunkBlocks, 3000);
    assert.equal((await published("chunk-set")).logsChunkBlocks, 3000);

    const list = (await h.ok(LIST, {}, ADMIN_TOKEN)).networks as { slug: string; logsChunkBlocks: number }[];
    assert.deepEqual(
      list.filter((n) => n.slug.startsWith("chunk-")),
      [
        { slug: "chunk-default", logsChunkBlocks: 2_000 },
        { slug: "chunk-set", logsChunkBlocks: 3000 },
      ],
    );
  });

  it("refuses negative, fractional or absurd chunk sizes, on create and update", async () => {
    for (const v of [-1, 1.5, 2_000_000_000]) {
      const bad = await h.gql(UPDATE, { s: "chunk-default", i: { logsChunkBlocks: v } }, ADMIN_TOKEN);
      assert.ok(bad.errors?.length, JSON.stringify(bad));
      // Int coercion refuses 1.5 before the service sees it; the service names the field for the others.
      if (Number.isInteger(v))
        assert.equal(bad.errors?.[0]?.extensions?.field, "logsChunkBlocks", JSON.stringify(bad));
      const badCreate = await h.gql(
        CREATE,
        {
          i: {
            slug: `chunk-bad-${String(v).replace(/\W/g, "")}`,
            name: "B",
            protocol: "EVM",
            logsChunkBlocks: v,
          },
        },
        ADMIN_TOKEN,
      );
      assert.ok(badCreate.errors?.length, JSON.stringify(badCreate));
      if (Number.isInteger(v)) {
        assert.equal(badCreate.errors?.[0]?.extensions?.field, "logsChunkBlocks", JSON.stringify(badCreate));
      }
    }
    assert.equal((await published("chunk-default")).logsChunkBlocks, 2_000);
    assert.equal(await h.redis.hexists(h.names.networks(), "chunk-bad-1"), 0);
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
    assert.equal(old.logsChunkBlocks, undefined);
    assert.equal(logsChunkBlocks(old), 2_000);
    assert.equal(logsChunkBlocks({ ...old, logsChunkBlocks: 0 }), 0);
    assert.throws(() => NetworkRecordSchema.parse({ ...old, logsChunkBlocks: -1 }));
  });
});
