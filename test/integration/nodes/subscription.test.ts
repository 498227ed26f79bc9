import assert from "node:assert/strict";
import { type Client, createClient } from "graphql-ws";
import WebSocket from "ws";
import { describeOverRedis } from "../../helpers/redis";
import type { Json } from "../control-plane/harness";
import { DEPLOY, FAST_SUBSTRATE, type NodesEnv, setPlan, startNodesEnv } from "./env";

const SUB = `subscription($id: ID!) { dedicatedNodeStatus(id: $id) { id status statusReason } }`;

function client(env: NodesEnv, token?: string): Client {
  return createClient({
    url: env.h.cp.url.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    retryAttempts: 0,
  });
}

/** Collects payloads until `until` holds; resolves with them, or rejects with the first error. */
function collect(c: Client, id: string, until: (n: Json) => boolean, timeoutMs = 30_000): Promise<Json[]> {
  return new Promise((resolve, reject) => {
    const seen: Json[] = [];
    const timer = setTimeout(() => {
      dispose();
      reject(new Error(`timeout; saw ${JSON.stringify(seen)}`));
    }, timeoutMs);
    const dispose = c.subscribe<Json>(
      { query: SUB, variables: { id } },
      {
        next: (r) => {
          if (r.errors) {
            clearTimeout(timer);
            dispose();
            reject(Object.assign(new Error(r.errors[0]!.message), { errors: r.errors }));
            return;
          }
          const n = r.data!.dedicatedNodeStatus as Json;
          seen.push(n);
          if (until(n)) {
            clearTimeout(timer);
            dispose();
            resolve(seen);
          }
        },
        error: (e) => {
          clearTimeout(timer);
          reject(Object.assign(new Error("subscription error"), { errors: e }));
        },
        complete: () => {
          clearTimeout(timer);
          resolve(seen);
        },
      },
    );
  });
}

describeOverRedis("dedicated nodes: graphql-ws status subscription", function (redis) {
  this.timeout(60_000);
  let env: NodesEnv;
  let owner: { token: string; workspaceId: string };
  const clients: Client[] = [];

  before(async () => {
    env = await startNodesEnv({ redis: redis() });
    owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
  });
  after(async () => {
    for (const c of clients) await c.dispose();
    await env?.close();
  });

  it("streams the node's status changes: PENDING ... SYNCED, then STOPPED", async () => {
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      {
        i: {
          displayName: "watched",
          network: "dot-test",
          nodeType: "FULL",
          region: "local",
          lightningRestore: false,
          launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE },
        },
      },
      owner.token,
    );
    const id = d.deployDedicatedNode.id as string;
    const c = client(env, owner.token);
    clients.push(c);
    const seen = await collect(c, id, (n) => n.status === "SYNCED");
    const statuses = seen.map((n) => n.status);
    assert.equal(statuses.at(-1), "SYNCED");
    assert.ok(statuses.length >= 2, JSON.stringify(statuses));
    const stopping = collect(c, id, (n) => n.status === "STOPPED");
    await env.h.ok(`mutation($id: ID!) { stopDedicatedNode(id: $id) { id } }`, { id }, owner.token);
    const later = (await stopping).map((n) => n.status);
    assert.equal(later.at(-1), "STOPPED");
  });

  it("internal errors are masked over graphql-ws like over HTTP; validation errors keep their code", async () => {
    const nodes = await env.h.ok<{ dedicatedNodes: Json[] }>("{ dedicatedNodes { id } }", {}, owner.token);
    const id = nodes.dedicatedNodes[0]!.id as string;
    const svc = env.h.cp.services.nodes;
    const original = svc.nodeForCaller;
    svc.nodeForCaller = async () => {
      throw new Error('relation "dedicated_nodes" does not exist (postgres://rg:s3cret@db/rg)');
    };
    try {
      const c = client(env, owner.token);
      clients.push(c);
      await assert.rejects(
        collect(c, id, () => true),
        (e: { errors: Json[] }) => {
          assert.equal(e.errors.length, 1);
          assert.equal(e.errors[0]!.message, "Internal server error");
          assert.equal(e.errors[0]!.extensions.code, "INTERNAL_SERVER_ERROR");
          assert.doesNotMatch(JSON.stringify(e.errors), /dedicated_nodes|s3cret|stack/);
          return true;
        },
      );
    } finally {
      svc.nodeForCaller = original;
    }
    const c = client(env, owner.token);
    clients.push(c);
    const invalid = await new Promise<Json[]>((resolve) => {
      c.subscribe(
        { query: "subscription { dedicatedNodeStatus(id: 1) { nope } }" },
        { next: () => {}, error: (e) => resolve(e as Json[]), complete: () => resolve([]) },
      );
    });
    assert.ok(invalid.length > 0);
    assert.equal(invalid[0]!.extensions.code, "GRAPHQL_VALIDATION_FAILED");
    assert.match(invalid[0]!.message, /nope/);
  });

  it("another workspace gets NOT_FOUND; no token: the connection is refused (4401)", async () => {
    const nodes = await env.h.ok<{ dedicatedNodes: Json[] }>("{ dedicatedNodes { id } }", {}, owner.token);
    const id = nodes.dedicatedNodes[0]!.id as string;
    const other = await env.h.signUp();
    const c = client(env, other.token);
    clients.push(c);
    await assert.rejects(
      collect(c, id, () => true),
      (e: { errors: Json[] }) => {
        assert.equal(e.errors[0]!.extensions.code, "NOT_FOUND");
        return true;
      },
    );
    // Authentication happens at connect: without a token the socket is closed before any operation.
    const anon = client(env);
    clients.push(anon);
    await assert.rejects(
      collect(anon, id, () => true),
      (e: { errors: { code: number; reason: string } }) => {
        assert.equal(e.errors.code, 4401);
        assert.match(e.errors.reason, /Unauthorized/);
        return true;
      },
    );
  });
});
