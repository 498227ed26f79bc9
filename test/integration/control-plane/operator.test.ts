import assert from "node:assert/strict";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { HealthRecordSchema } from "../../../shared/src/redis/records";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { describeOnRedisCluster } from "../../helpers/redis";
import { StubUpstream } from "../data-plane/stub-upstream";
import { ADMIN_TOKEN, code, createApp, type Harness, startHarness, startHarnessDataPlane } from "./harness";

/** A data plane that publishes its upstreams' health every 200 ms, with limits and usage off. */
const HEALTH_PLANE_ENV = {
  RATE_LIMIT_MODE: "off",
  QUOTA_MODE: "off",
  USAGE_MODE: "off",
  HEALTH_CHECK_INTERVAL_MS: "200",
  HEALTH_PUBLISH_INTERVAL_MS: "200",
};

const SET_OP = `mutation($a: String!, $o: Boolean!) { setOperator(account: $a, operator: $o) { id email isOperator } }`;
const HEALTH_Q = `{ networks { slug upstreams { id httpUrl health { instances healthyInstances healthy head lagBlocks
  latencyMs errorRate breakerOpen perInstance { instanceId at healthy head lagBlocks } } } } }`;

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
}

describe("control-plane: platform operators (issue 17 §1)", () => {
  let h: Harness;
  let op: { token: string; accountId: string; workspaceId: string };
  let owner: { token: string; accountId: string; workspaceId: string };
  let opEmail: string;

  before(async () => {
    h = await startHarness();
    opEmail = `ops-${Date.now()}@example.com`;
    op = await h.signUp(opEmail);
    owner = await h.signUp();
  });
  after(async () => {
    await h?.close();
  });

  it("setOperator: only the ADMIN_TOKEN grants it, by email or id; accounts start without it", async () => {
    assert.equal((await h.ok("{ me { isOperator } }", {}, op.token)).me.isOperator, false);
    assert.equal(code(await h.gql(SET_OP, { a: opEmail, o: true })), "UNAUTHENTICATED");
    assert.equal(code(await h.gql(SET_OP, { a: opEmail, o: true }, owner.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(SET_OP, { a: "nobody@example.com", o: true }, ADMIN_TOKEN)), "NOT_FOUND");
    const d = await h.ok(SET_OP, { a: opEmail.toUpperCase(), o: true }, ADMIN_TOKEN);
    assert.deepEqual(d.setOperator, { id: op.accountId, email: opEmail, isOperator: true });
    assert.equal((await h.ok("{ me { isOperator } }", {}, op.token)).me.isOperator, true);
    // An operator account may not make others operators (that stays with the ADMIN_TOKEN).
    assert.equal(code(await h.gql(SET_OP, { a: owner.accountId, o: true }, op.token)), "FORBIDDEN");
    assert.equal((await h.ok("{ me { isOperator } }", {}, owner.token)).me.isOperator, false);
  });

  it("an operator account manages networks, upstreams, plans and any workspace's plan", async () => {
    await h.ok(
      `mutation { createNetwork(input: { slug: "op-net", name: "Op", protocol: EVM, chainId: 5 }) { id } }`,
      {},
      op.token,
    );
    await h.ok(`mutation { updateNetwork(slug: "op-net", input: { name: "Op 2" }) { name } }`, {}, op.token);
    const u = await h.ok(
      `mutation { addUpstream(networkSlug: "op-net", input: { httpUrl: "http://127.0.0.1:18545" }) { id } }`,
      {},
      op.token,
    );
    const up = await h.ok(
      `mutation($id: ID!) { updateUpstream(networkSlug: "op-net", upstreamId: $id, input: { weight: 7 }) { weight } }`,
      { id: u.addUpstream.id },
      op.token,
    );
    assert.equal(up.updateUpstream.weight, 7);
    const nets = await h.ok(`{ networks { slug name upstreams { id weight } } }`, {}, op.token);
    const net = nets.networks.find((n: { slug: string }) => n.slug === "op-net");
    assert.deepEqual(net, { slug: "op-net", name: "Op 2", upstreams: [{ id: u.addUpstream.id, weight: 7 }] });
    await h.ok(`mutation($id: ID!) { removeUpstream(id: $id) { id } }`, { id: u.addUpstream.id }, op.token);

    const plan = await h.ok(
      `mutation { upsertPlan(input: { name: "op-private", dailyRequestLimit: 123, requestsPerSecond: 4, selfService: false }) { name selfService } }`,
      {},
      op.token,
    );
    assert.deepEqual(plan.upsertPlan, { name: "op-private", selfService: false });
    // Every plan, private ones included (a tenant sees only self-service ones and its own).
    const opPlans = (await h.ok("{ plans { name selfService } }", {}, op.token)).plans.map(
      (p: { name: string }) => p.name,
    );
    assert.ok(opPlans.includes("op-private") && opPlans.includes("enterprise"), opPlans.join());
    const ownerPlans = (await h.ok("{ plans { name } }", {}, owner.token)).plans.map(
      (p: { name: string }) => p.name,
    );
    assert.ok(!ownerPlans.includes("op-private"), ownerPlans.join());

    // The owner's workspace, of which the operator account is not a member.
    const s = await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "op-private") { id plan { name } } }`,
      { w: owner.workspaceId },
      op.token,
    );
    assert.equal(s.setWorkspacePlan.plan.name, "op-private");
    assert.equal(
      (await h.ok("{ workspace { plan { name } } }", {}, owner.token)).workspace.plan.name,
      "op-private",
    );
    const bad = await h.gql(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "free") { id } }`,
      { w: "00000000-0000-4000-8000-000000000000" },
      op.token,
    );
    assert.equal(code(bad), "NOT_FOUND");
  });

  it("operatorWorkspaces: every workspace with plan, members and today's usage against its limit", async () => {
    const d = await h.ok(
      `{ operatorWorkspaces { id name plan { name dailyRequestLimit } operatorMembers { accountId email role }
         today { count limit } } }`,
      {},
      op.token,
    );
    const ws = d.operatorWorkspaces.find((w: { id: string }) => w.id === owner.workspaceId);
    assert.ok(ws, "the owner's workspace is listed");
    assert.equal(ws.plan.name, "op-private");
    assert.deepEqual(ws.today, { count: 0, limit: 123 });
    assert.equal(ws.operatorMembers.length, 1);
    assert.equal(ws.operatorMembers[0].accountId, owner.accountId);
    assert.equal(ws.operatorMembers[0].role, "OWNER");
    assert.ok(d.operatorWorkspaces.some((w: { id: string }) => w.id === op.workspaceId));
  });

  it("platformUsage sums every workspace's rollups over the range, hourly", async () => {
    const now = Date.now();
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    const ins = (at: number, ws: string, category: string, count: number) =>
      h.cp.dataSource.query(
        `INSERT INTO usage_hour (hour, workspace_id, app_id, network, method, category, count, latency_sum_ms)
         VALUES ($1, $2, '00000000-0000-0000-0000-000000000000', 'op-net', 'eth_call', $3, $4, 0)`,
        [new Date(at), ws, category, count],
      );
    await ins(hour, owner.workspaceId, "Success", 40);
    await ins(hour, owner.workspaceId, "Node Error", 2);
    await ins(hour - 3_600_000, op.workspaceId, "Success", 10);
    await ins(hour - 3_600_000, "00000000-0000-0000-0000-000000000000", "Client Error", 5);
    // Outside the range asked for: not counted.
    await ins(hour - 30 * 3_600_000, owner.workspaceId, "Success", 1000);
    const d = await h.ok(
      `query($f: DateTimeISO, $t: DateTimeISO) { platformUsage(from: $f, to: $t) { requests errors
         series { at requests errors } byWorkspace { workspaceId workspaceName requests errors } } }`,
      { f: new Date(hour - 5 * 3_600_000).toISOString(), t: new Date(now + 1000).toISOString() },
      op.token,
    );
    const u = d.platformUsage;
    assert.equal(u.requests, 57);
    assert.equal(u.errors, 7);
    assert.equal(u.series.length, 6);
    assert.deepEqual(u.series.at(-1), { at: new Date(hour).toISOString(), requests: 42, errors: 2 });
    assert.deepEqual(u.series.at(-2), {
      at: new Date(hour - 3_600_000).toISOString(),
      requests: 15,
      errors: 5,
    });
    assert.deepEqual(u.byWorkspace[0], {
      workspaceId: owner.workspaceId,
      workspaceName: `WS ${(await h.ok("{ me { email } }", {}, owner.token)).me.email}`,
      requests: 42,
      errors: 2,
    });
    assert.ok(u.byWorkspace.some((w: { workspaceId: string | null }) => w.workspaceId === null));

    // Beyond 7 days the daily rollup is read: one point per UTC day.
    const day = new Date(hour).toISOString().slice(0, 10);
    await h.cp.dataSource.query(
      `INSERT INTO usage_day (day, workspace_id, app_id, network, method, category, count, latency_sum_ms)
       VALUES ($1::date, $2, '00000000-0000-0000-0000-000000000000', 'op-net', 'eth_call', 'Success', 500, 0),
              ($1::date, $2, '00000000-0000-0000-0000-000000000000', 'op-net', 'eth_call', 'Client Error', 7, 0)`,
      [day, owner.workspaceId],
    );
    const long = await h.ok(
      `query($f: DateTimeISO) { platformUsage(from: $f) { requests errors series { at requests } } }`,
      { f: new Date(now - 20 * 86_400_000).toISOString() },
      op.token,
    );
    assert.equal(long.platformUsage.requests, 507);
    assert.equal(long.platformUsage.errors, 7);
    assert.ok(long.platformUsage.series.length >= 20 && long.platformUsage.series.length <= 21);
    assert.deepEqual(long.platformUsage.series.at(-1), { at: `${day}T00:00:00.000Z`, requests: 507 });
    const tooLong = await h.gql(
      `query($f: DateTimeISO) { platformUsage(from: $f) { requests } }`,
      { f: new Date(now - 1000 * 86_400_000).toISOString() },
      op.token,
    );
    assert.equal(code(tooLong), "BAD_USER_INPUT");
  });

  it("tenant isolation: a workspace OWNER gets FORBIDDEN on every operator operation", async () => {
    const w = { w: owner.workspaceId };
    const attempts: [string, string, Record<string, unknown>][] = [
      ["operatorWorkspaces", "{ operatorWorkspaces { id } }", {}],
      ["platformUsage", "{ platformUsage { requests } }", {}],
      ["Workspace.operatorMembers", "{ workspace { operatorMembers { email } } }", {}],
      ["Upstream.health", "{ networks { upstreams { health { instances } } } }", {}],
      ["setOperator(self)", SET_OP, { a: owner.accountId, o: true }],
      [
        "createNetwork",
        `mutation { createNetwork(input: { slug: "x-net", name: "X", protocol: EVM, chainId: 9 }) { id } }`,
        {},
      ],
      ["updateNetwork", `mutation { updateNetwork(slug: "op-net", input: { name: "pwned" }) { id } }`, {}],
      ["removeNetwork", `mutation { removeNetwork(slug: "op-net") { id } }`, {}],
      [
        "addUpstream",
        `mutation { addUpstream(networkSlug: "op-net", input: { httpUrl: "http://x" }) { id } }`,
        {},
      ],
      [
        "upsertPlan",
        `mutation { upsertPlan(input: { name: "free", dailyRequestLimit: 999999999, requestsPerSecond: 9999 }) { name } }`,
        {},
      ],
      [
        "setWorkspacePlan(own workspace)",
        `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "enterprise") { id } }`,
        w,
      ],
    ];
    const up = await h.ok(
      `mutation { addUpstream(networkSlug: "op-net", input: { httpUrl: "http://127.0.0.1:18546" }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    attempts.push(
      [
        "updateUpstream",
        `mutation($id: ID!) { updateUpstream(networkSlug: "op-net", upstreamId: $id, input: { weight: 1 }) { id } }`,
        { id: up.addUpstream.id },
      ],
      ["removeUpstream", `mutation($id: ID!) { removeUpstream(id: $id) { id } }`, { id: up.addUpstream.id }],
    );
    for (const [name, q, vars] of attempts) {
      const r = await h.gql(q, vars, owner.token);
      assert.equal(code(r), "FORBIDDEN", `${name}: ${JSON.stringify(r.errors ?? r.data)}`);
      const anon = await h.gql(q, vars);
      // `networks` is public, so its operator-only `upstreams` field answers FORBIDDEN, not UNAUTHENTICATED.
      const anonCode = name === "Upstream.health" ? "FORBIDDEN" : "UNAUTHENTICATED";
      assert.equal(code(anon), anonCode, `${name} (anonymous): ${JSON.stringify(anon.errors)}`);
    }
    // Nothing changed: the upstream is still there, the network kept its name, the plan stayed.
    const nets = await h.ok(`{ networks { slug name upstreams { id } } }`, {}, ADMIN_TOKEN);
    const net = nets.networks.find((n: { slug: string }) => n.slug === "op-net");
    assert.equal(net.name, "Op 2");
    assert.deepEqual(net.upstreams, [{ id: up.addUpstream.id }]);
    assert.equal(
      (await h.ok("{ workspace { plan { name } } }", {}, owner.token)).workspace.plan.name,
      "op-private",
    );
    assert.equal((await h.ok("{ me { isOperator } }", {}, owner.token)).me.isOperator, false);
    await h.ok(
      `mutation($id: ID!) { removeUpstream(id: $id) { id } }`,
      { id: up.addUpstream.id },
      ADMIN_TOKEN,
    );
  });

  it("removeNetwork: an operator account removes a network with its upstreams; data planes are told", async () => {
    await h.ok(
      `mutation { createNetwork(input: { slug: "gone-net", name: "Gone", protocol: EVM, chainId: 8 }) { id } }`,
      {},
      op.token,
    );
    await h.ok(
      `mutation { addUpstream(networkSlug: "gone-net", input: { httpUrl: "http://127.0.0.1:18547" }) { id } }`,
      {},
      op.token,
    );
    assert.ok(await h.redis.hget(h.names.networks(), "gone-net"));
    const d = await h.ok(`mutation { removeNetwork(slug: "gone-net") { slug } }`, {}, op.token);
    assert.equal(d.removeNetwork.slug, "gone-net");
    assert.equal(await h.redis.hget(h.names.networks(), "gone-net"), null);
    const n = await h.cp.dataSource.query(
      `SELECT count(*)::int AS c FROM upstreams WHERE http_url = 'http://127.0.0.1:18547'`,
    );
    assert.equal(n[0].c, 0);
    assert.equal(
      code(await h.gql(`mutation { removeNetwork(slug: "gone-net") { id } }`, {}, op.token)),
      "NOT_FOUND",
    );
  });

  it("an operator account gets no rights inside workspaces it is not a member of", async () => {
    const app = await createApp(h, owner.token, "owner's app");
    const r = await h.gql(`query($id: ID!) { app(id: $id) { id apiKey } }`, { id: app.id }, op.token);
    assert.equal(code(r), "NOT_FOUND");
    const ws = await h.gql(`query($w: ID!) { workspace(id: $w) { id } }`, { w: owner.workspaceId }, op.token);
    assert.equal(code(ws), "NOT_FOUND");
    const mine = (await h.ok("{ workspaces { id } }", {}, op.token)).workspaces.map(
      (x: { id: string }) => x.id,
    );
    assert.deepEqual(mine, [op.workspaceId]);
  });

  it("revoking the flag takes effect at the next request", async () => {
    await h.ok(SET_OP, { a: op.accountId, o: false }, ADMIN_TOKEN);
    assert.equal(code(await h.gql("{ operatorWorkspaces { id } }", {}, op.token)), "FORBIDDEN");
    await h.ok(SET_OP, { a: op.accountId, o: true }, ADMIN_TOKEN);
    await h.ok("{ operatorWorkspaces { id } }", {}, op.token);
  });

  describe("upstream health published by a real data plane against anvil", () => {
    let anvil: Anvil;
    let dp: DataPlane | undefined;
    let upstreamId: string;
    // Faults the health record must show: a node stuck 6+ blocks behind, and one answering 500.
    const lagging = new StubUpstream();
    const failing = new StubUpstream();
    let laggingId: string;
    let failingId: string;

    before(async () => {
      await lagging.start();
      lagging.head = 1;
      await failing.start();
      failing.mode = "error500";
      anvil = await startAnvil();
      await h.ok(
        `mutation { createNetwork(input: { slug: "anvil-net", name: "Anvil", protocol: EVM, chainId: 31337 }) { id } }`,
        {},
        op.token,
      );
      const u = await h.ok(
        `mutation($u: String!) { addUpstream(networkSlug: "anvil-net", input: { httpUrl: $u }) { id } }`,
        { u: anvil.httpUrl },
        op.token,
      );
      upstreamId = u.addUpstream.id;
      for (const [stub, set] of [
        [lagging, (id: string) => (laggingId = id)],
        [failing, (id: string) => (failingId = id)],
      ] as const) {
        const r = await h.ok(
          `mutation($u: String!) { addUpstream(networkSlug: "anvil-net", input: { httpUrl: $u }) { id } }`,
          { u: stub.url },
          op.token,
        );
        set(r.addUpstream.id);
      }
      // Some blocks, so the head is not 0.
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x7"] }),
      });
      dp = await startHarnessDataPlane(h, HEALTH_PLANE_ENV);
    });
    after(async () => {
      await dp?.close();
      await anvil?.stop();
      await lagging.stop();
      await failing.stop();
    });

    it("shows a lagging upstream's lag and a failing one's errors, both unhealthy", async () => {
      const byId = await until("the faulty upstreams reported", async () => {
        const d = await h.ok(HEALTH_Q, {}, op.token);
        const net = d.networks.find((n: { slug: string }) => n.slug === "anvil-net");
        const m = new Map<string, Record<string, unknown>>(
          net.upstreams.map((x: { id: string; health: Record<string, unknown> }) => [x.id, x.health]),
        );
        const l = m.get(laggingId)!;
        const f = m.get(failingId)!;
        return l.lagBlocks === 6 && (f.errorRate as number) > 0 && f.healthy === false ? m : undefined;
      });
      const l = byId.get(laggingId)!;
      assert.deepEqual(
        { healthy: l.healthy, head: l.head, lagBlocks: l.lagBlocks, instances: l.instances },
        { healthy: false, head: 1, lagBlocks: 6, instances: 1 },
      );
      const f = byId.get(failingId)!;
      assert.equal(f.head, null, "never answered a head");
      assert.equal(byId.get(upstreamId)!.healthy, true);
    });

    it("writes a per-instance record with a TTL, read back through GraphQL as healthy with head and lag", async () => {
      const instanceId = dp!.health!.instanceId;
      const raw = await until(
        "the health record",
        async () => (await h.redis.get(h.names.upstreamHealth(instanceId))) ?? undefined,
      );
      const rec = HealthRecordSchema.parse(JSON.parse(raw));
      assert.equal(rec.instanceId, instanceId);
      const ttl = await h.redis.pttl(h.names.upstreamHealth(instanceId));
      assert.ok(ttl > 0 && ttl <= 600, `TTL ${ttl} ms (3 x 200 ms)`);

      const health = await until("a healthy upstream at head 7", async () => {
        const d = await h.ok(HEALTH_Q, {}, op.token);
        const net = d.networks.find((n: { slug: string }) => n.slug === "anvil-net");
        const hl = net.upstreams.find((x: { id: string }) => x.id === upstreamId).health;
        return hl.healthy && hl.head === 7 ? hl : undefined;
      });
      assert.equal(health.instances, 1);
      assert.equal(health.healthyInstances, 1);
      assert.equal(health.lagBlocks, 0);
      assert.equal(health.breakerOpen, false);
      assert.equal(health.errorRate, 0);
      assert.ok(health.latencyMs >= 0);
      assert.equal(health.perInstance[0].instanceId, instanceId);

      // A new block shows up in the published head.
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x3"] }),
      });
      await until("head 10", async () => {
        const d = await h.ok(HEALTH_Q, {}, op.token);
        const net = d.networks.find((n: { slug: string }) => n.slug === "anvil-net");
        const a = net.upstreams.find((x: { id: string }) => x.id === upstreamId);
        return a.health.head === 10 ? true : undefined;
      });

      // The data plane stops: its record goes, and the upstream shows no live data.
      await dp!.close();
      dp = undefined;
      const gone = await h.ok(HEALTH_Q, {}, op.token);
      const net = gone.networks.find((n: { slug: string }) => n.slug === "anvil-net");
      const a = net.upstreams.find((x: { id: string }) => x.id === upstreamId);
      assert.deepEqual(
        { instances: a.health.instances, healthy: a.health.healthy },
        { instances: 0, healthy: false },
      );
      assert.equal(await h.redis.hget(h.names.upstreamHealthInstances(), instanceId), null);
    });

    it("an instance that dies without closing drops out when its record's TTL runs out", async () => {
      const rec = {
        instanceId: "dead-instance",
        atMs: Date.now(),
        networks: [{ slug: "anvil-net", head: 12, upstreams: [] }],
      };
      await h.redis.set(h.names.upstreamHealth("dead-instance"), JSON.stringify(rec), "PX", 300);
      await h.redis.hset(h.names.upstreamHealthInstances(), "dead-instance", String(rec.atMs));
      // Its record expires (300 ms); the next read of the health view prunes the instance.
      await eventually(
        async () => (await h.redis.exists(h.names.upstreamHealth("dead-instance"))) === 0,
        "the record's expiry",
      );
      await h.ok(HEALTH_Q, {}, op.token);
      assert.equal(await h.redis.hget(h.names.upstreamHealthInstances(), "dead-instance"), null);
    });
  });
});

describeOnRedisCluster("control-plane: upstream health records", (redis) => {
  let h: Harness;
  let anvil: Anvil;
  let dp: DataPlane | undefined;

  before(async () => {
    h = await startHarness({}, { redis: redis() });
    anvil = await startAnvil();
    await h.ok(
      `mutation($u: String!) {
        n: createNetwork(input: { slug: "c-net", name: "C", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "c-net", input: { httpUrl: $u }) { id } }`,
      { u: anvil.httpUrl },
      ADMIN_TOKEN,
    );
    dp = await startHarnessDataPlane(h, HEALTH_PLANE_ENV);
  });
  after(async () => {
    await dp?.close();
    await anvil?.stop();
    await h?.close();
  });

  it("are written and read back through GraphQL on a Redis Cluster", async () => {
    const health = await until("a healthy upstream", async () => {
      const d = await h.ok(HEALTH_Q, {}, ADMIN_TOKEN);
      const hl = d.networks[0].upstreams[0].health;
      return hl.healthy ? hl : undefined;
    });
    assert.deepEqual(
      { instances: health.instances, head: health.head, lagBlocks: health.lagBlocks },
      { instances: 1, head: 0, lagBlocks: 0 },
    );
  });
});
