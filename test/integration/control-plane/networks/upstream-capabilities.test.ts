import assert from "node:assert/strict";
import { NetworkRecordSchema } from "../../../../shared/src/redis/records";
import { ADMIN_TOKEN, code, type Harness, startHarness } from "../harness";

const CAPS = "id weight archiveMode methodFamilies maxRequestsPerSecond";
const ADD = `mutation($s: String!, $i: AddUpstreamInput!) { addUpstream(networkSlug: $s, input: $i) { ${CAPS} } }`;
const UPDATE = `mutation($s: String!, $id: ID!, $i: UpdateUpstreamInput!) {
  updateUpstream(networkSlug: $s, upstreamId: $id, input: $i) { ${CAPS} } }`;

describe("control-plane: upstream capabilities (archive mode, method families, budget)", () => {
  let h: Harness;
  let user: { token: string; workspaceId: string };
  before(async () => {
    h = await startHarness();
    user = await h.signUp();
    for (const slug of ["caps", "other"]) {
      await h.ok(
        `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { slug } }`,
        { i: { slug, name: slug, protocol: "EVM", chainId: 1 } },
        ADMIN_TOKEN,
      );
    }
  });
  after(async () => {
    await h?.close();
  });

  const published = async (slug: string) =>
    NetworkRecordSchema.parse(JSON.parse((await h.redis.hget(h.names.networks(), slug))!)).upstreams;

  it("addUpstream: defaults (AUTO, none declared, no budget) and settings, published with the network", async () => {
    const plain = (await h.ok(ADD, { s: "caps", i: { httpUrl: "http://127.0.0.1:18541" } }, ADMIN_TOKEN))
      .addUpstream;
    assert.deepEqual(
      { ...plain, id: undefined },
      { id: undefined, weight: 1, archiveMode: "AUTO", methodFamilies: null, maxRequestsPerSecond: null },
    );
    const set = (
      await h.ok(
        ADD,
        {
          s: "caps",
          i: {
            httpUrl: "http://127.0.0.1:18542",
            archiveMode: "ARCHIVE",
            methodFamilies: ["TRACE", "DEBUG", "TRACE"],
            maxRequestsPerSecond: 25,
          },
        },
        ADMIN_TOKEN,
      )
    ).addUpstream;
    // Deduplicated, in a fixed order.
    assert.deepEqual(set.methodFamilies, ["DEBUG", "TRACE"]);
    assert.equal(set.archiveMode, "ARCHIVE");
    assert.equal(set.maxRequestsPerSecond, 25);
    const ups = await published("caps");
    assert.deepEqual(
      ups.map((u) => [u.id, u.archiveMode, u.methodFamilies, u.maxRequestsPerSecond]),
      [
        [plain.id, "AUTO", null, null],
        [set.id, "ARCHIVE", ["debug", "trace"], 25],
      ],
    );
    // `network { upstreams { ... } }` shows them.
    const nets = await h.ok(`{ networks { slug upstreams { ${CAPS} } } }`, {}, ADMIN_TOKEN);
    const caps = nets.networks.find((n: { slug: string }) => n.slug === "caps");
    assert.deepEqual(caps.upstreams, [plain, set]);
  });

  it("updateUpstream: edits what it is given, keeps the rest, clears with [] and 0, republishes", async () => {
    const up = (await h.ok(ADD, { s: "caps", i: { httpUrl: "http://127.0.0.1:18543" } }, ADMIN_TOKEN))
      .addUpstream;
    const a = (
      await h.ok(
        UPDATE,
        {
          s: "caps",
          id: up.id,
          i: { archiveMode: "PRUNED", methodFamilies: ["DEBUG"], maxRequestsPerSecond: 7 },
        },
        ADMIN_TOKEN,
      )
    ).updateUpstream;
    assert.deepEqual(a, {
      id: up.id,
      weight: 1,
      archiveMode: "PRUNED",
      methodFamilies: ["DEBUG"],
      maxRequestsPerSecond: 7,
    });
    let rec = (await published("caps")).find((u) => u.id === up.id)!;
    assert.equal(rec.archiveMode, "PRUNED");
    assert.deepEqual(rec.methodFamilies, ["debug"]);
    assert.equal(rec.maxRequestsPerSecond, 7);

    const b = (await h.ok(UPDATE, { s: "caps", id: up.id, i: { weight: 9 } }, ADMIN_TOKEN)).updateUpstream;
    assert.deepEqual(b, { ...a, weight: 9 }, "fields left out keep their value");

    const c = (
      await h.ok(
        UPDATE,
        { s: "caps", id: up.id, i: { methodFamilies: [], maxRequestsPerSecond: 0 } },
        ADMIN_TOKEN,
      )
    ).updateUpstream;
    assert.equal(c.methodFamilies, null);
    assert.equal(c.maxRequestsPerSecond, null);
    assert.equal(c.archiveMode, "PRUNED");
    rec = (await published("caps")).find((u) => u.id === up.id)!;
    assert.equal(rec.methodFamilies, null);
    assert.equal(rec.maxRequestsPerSecond, null);
    assert.equal(rec.weight, 9);
  });

  it("validation: budget range, weight, enums, unknown or foreign upstream", async () => {
    const up = (await h.ok(ADD, { s: "caps", i: { httpUrl: "http://127.0.0.1:18544" } }, ADMIN_TOKEN))
      .addUpstream;
    for (const v of [-1, 1_000_001]) {
      const bad = await h.gql(UPDATE, { s: "caps", id: up.id, i: { maxRequestsPerSecond: v } }, ADMIN_TOKEN);
      assert.equal(bad.errors?.[0]?.extensions?.field, "maxRequestsPerSecond", JSON.stringify(bad));
      const badAdd = await h.gql(
        ADD,
        { s: "caps", i: { httpUrl: "http://127.0.0.1:18549", maxRequestsPerSecond: v } },
        ADMIN_TOKEN,
      );
      assert.equal(badAdd.errors?.[0]?.extensions?.field, "maxRequestsPerSecond", JSON.stringify(badAdd));
    }
    const badWeight = await h.gql(UPDATE, { s: "caps", id: up.id, i: { weight: 0 } }, ADMIN_TOKEN);
    assert.equal(badWeight.errors?.[0]?.extensions?.field, "weight");
    // GraphQL itself refuses a value outside the enums.
    const badMode = await h.gql(UPDATE, { s: "caps", id: up.id, i: { archiveMode: "FULL" } }, ADMIN_TOKEN);
    assert.ok(badMode.errors?.length);
    const badFamily = await h.gql(
      UPDATE,
      { s: "caps", id: up.id, i: { methodFamilies: ["ADMIN"] } },
      ADMIN_TOKEN,
    );
    assert.ok(badFamily.errors?.length);
    // Nothing of the refused edits stuck, nor of the refused add.
    const rec = (await published("caps")).find((u) => u.id === up.id)!;
    assert.deepEqual([rec.weight, rec.archiveMode, rec.maxRequestsPerSecond], [1, "AUTO", null]);
    assert.ok(!(await published("caps")).some((u) => u.httpUrl === "http://127.0.0.1:18549"));

    assert.equal(
      code(await h.gql(UPDATE, { s: "other", id: up.id, i: { weight: 2 } }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );
    assert.equal(
      code(await h.gql(UPDATE, { s: "nope", id: up.id, i: { weight: 2 } }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );
    assert.equal(
      code(await h.gql(UPDATE, { s: "caps", id: "not-a-uuid", i: { weight: 2 } }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );
  });

  it("only the operator: a tenant gets FORBIDDEN, no token UNAUTHENTICATED, nothing changes", async () => {
    const up = (await h.ok(ADD, { s: "caps", i: { httpUrl: "http://127.0.0.1:18545" } }, ADMIN_TOKEN))
      .addUpstream;
    const vars = { s: "caps", id: up.id, i: { archiveMode: "ARCHIVE", maxRequestsPerSecond: 1 } };
    assert.equal(code(await h.gql(UPDATE, vars, user.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(UPDATE, vars)), "UNAUTHENTICATED");
    assert.equal(
      code(
        await h.gql(
          ADD,
          { s: "caps", i: { httpUrl: "http://127.0.0.1:18546", archiveMode: "ARCHIVE" } },
          user.token,
        ),
      ),
      "FORBIDDEN",
    );
    const rec = (await published("caps")).find((u) => u.id === up.id)!;
    assert.equal(rec.archiveMode, "AUTO");
    assert.equal(rec.maxRequestsPerSecond, null);
    // A tenant cannot read them either (upstreams are the operator's).
    const r = await h.gql(`{ networks { slug upstreams { archiveMode } } }`, {}, user.token);
    assert.equal(code(r), "FORBIDDEN");
  });

  it("the migration's checks hold in Postgres too", async () => {
    await assert.rejects(
      h.cp.dataSource.query("UPDATE upstreams SET archive_mode = 'FULL'"),
      /check constraint/,
    );
    await assert.rejects(
      h.cp.dataSource.query("UPDATE upstreams SET method_families = ARRAY['admin']"),
      /check constraint/,
    );
    await assert.rejects(
      h.cp.dataSource.query("UPDATE upstreams SET max_requests_per_second = 0"),
      /check constraint/,
    );
  });
});
