import assert from "node:assert/strict";
import { type Client, createClient } from "graphql-ws";
import WebSocket from "ws";
import { eventually } from "../../helpers/eventually";
import { ADMIN_TOKEN, Harness, Json, startHarness } from "./harness";

const SUB = `subscription($id: ID!) { dedicatedNodeStatus(id: $id) { id status } }`;
const RECHECK_MS = 200;

interface Closed {
  code: number;
  reason: string;
}

/**
 * graphql-ws over loopback with the real client: authentication at connect, the 1 MiB message cap, the
 * HTTP limits on every operation, and sockets closed when their token is revoked or expires. The nodes
 * here stay PENDING (no worker): enough for a live `dedicatedNodeStatus` subscription.
 */
describe("control-plane: graphql-ws limits and authentication", function () {
  this.timeout(30_000);
  let h: Harness;
  let wsUrl: string;
  const clients: Client[] = [];

  before(async () => {
    h = await startHarness({
      GRAPHQL_WS_AUTH_RECHECK_MS: String(RECHECK_MS),
      GRAPHQL_WS_MAX_OPERATIONS: "3",
    });
    wsUrl = h.cp.url.replace(/^http/, "ws");
    await h.ok(
      `mutation { createNetwork(input: { slug: "dot-test", name: "Substrate test", protocol: SUBSTRATE }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
  });
  after(async () => {
    for (const c of clients) await c.dispose();
    await h?.close();
  });

  function client(token?: string, onClosed?: (e: Closed) => void, lazy = true): Client {
    const c = createClient({
      url: wsUrl,
      // lazy: false keeps the socket open between operations.
      lazy,
      webSocketImpl: WebSocket,
      connectionParams: token ? { authorization: `Bearer ${token}` } : {},
      retryAttempts: 0,
      on: onClosed ? { closed: (e) => onClosed(e as Closed) } : undefined,
    });
    clients.push(c);
    return c;
  }

  /** A raw graphql-transport-ws socket: resolves with the close, or "ack" once acknowledged. */
  function rawInit(payload: unknown): Promise<Closed | "ack"> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl, "graphql-transport-ws");
      ws.on("open", () => ws.send(JSON.stringify({ type: "connection_init", payload })));
      ws.on("message", (m) => {
        if (JSON.parse(String(m)).type === "connection_ack") {
          ws.close(1000);
          resolve("ack");
        }
      });
      ws.on("close", (code, reason) => resolve({ code, reason: String(reason) }));
      ws.on("error", reject);
    });
  }

  /** A member with a PENDING node (growth plan) and a running subscription to it; resolves on the first payload. */
  async function liveSubscription(token: string, workspaceId: string) {
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "growth") { id } }`,
      { w: workspaceId },
      ADMIN_TOKEN,
    );
    const d = await h.ok<{ deployDedicatedNode: { id: string } }>(
      `mutation($i: DeployDedicatedNodeInput!) { deployDedicatedNode(input: $i) { id } }`,
      {
        i: {
          displayName: "watched",
          network: "dot-test",
          nodeType: "FULL",
          region: "local",
          launchArgs: { rpcMethods: "SAFE" },
        },
      },
      token,
    );
    const id = d.deployDedicatedNode.id;
    let resolveClosed!: (e: Closed) => void;
    const closed = new Promise<Closed>((r) => {
      resolveClosed = r;
    });
    const c = client(token, resolveClosed);
    const payloads: Json[] = [];
    const ended = new Promise<unknown>((resolve) => {
      c.subscribe<Json>(
        { query: SUB, variables: { id } },
        {
          next: (r) => payloads.push(r as Json),
          error: (e) => resolve(e),
          complete: () => resolve("complete"),
        },
      );
    });
    await eventually(() => payloads.length > 0, "the first payload");
    assert.equal(payloads[0]!.data.dedicatedNodeStatus.status, "PENDING");
    return { closed, ended, payloads, nodeId: id };
  }

  /**
   * Fails unless `p` settles before a generous deadline: what is awaited happens by itself or never (no
   * other timer would close these sockets), so the deadline only ends a failing test, and how long it
   * took on a loaded machine is no part of the check.
   */
  function within<T>(p: Promise<T>, what: string): Promise<T> {
    const ms = 10_000;
    return Promise.race([
      p,
      new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
    ]);
  }

  it("refuses a connection without a token, or with a bad one, with 4401 before any operation", async () => {
    for (const payload of [undefined, {}, { authorization: "" }, { authorization: 42 }]) {
      const r = await rawInit(payload);
      assert.notEqual(r, "ack", JSON.stringify(payload));
      assert.equal((r as Closed).code, 4401, JSON.stringify(payload));
      assert.match((r as Closed).reason, /^Unauthorized/);
    }
    const bad = (await rawInit({ authorization: "Bearer rgs_not-a-token" })) as Closed;
    assert.equal(bad.code, 4401);
    assert.match(bad.reason, /Invalid, expired or revoked token/);
    const basic = (await rawInit({ authorization: "Basic abc" })) as Closed;
    assert.equal(basic.code, 4401);
    assert.match(basic.reason, /Bearer TOKEN/);
    const u = await h.signUp();
    assert.equal(await rawInit({ authorization: `Bearer ${u.token}` }), "ack");
    assert.equal(await rawInit({ authorization: `Bearer ${ADMIN_TOKEN}` }), "ack");
  });

  it("a message over 1 MiB closes only its socket (1009); the server and other sockets keep working", async () => {
    const u = await h.signUp();
    const live = await liveSubscription(u.token, u.workspaceId);
    const closed = await new Promise<Closed>((resolve, reject) => {
      const ws = new WebSocket(wsUrl, "graphql-transport-ws");
      ws.on("open", () =>
        ws.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${u.token}` } })),
      );
      ws.on("message", () => {
        ws.send(
          JSON.stringify({
            id: "1",
            type: "subscribe",
            payload: { query: "{ networks { slug } }", variables: { pad: "x".repeat(1024 * 1024 + 10) } },
          }),
        );
      });
      ws.on("close", (code, reason) => resolve({ code, reason: String(reason) }));
      ws.on("error", reject);
    });
    assert.equal(closed.code, 1009);
    // The other connection's subscription is still open (a change to its node is delivered, and the
    // stream has not ended), and new work is served.
    assert.equal(live.payloads.length, 1);
    let ended = false;
    void live.ended.then(() => {
      ended = true;
    });
    await h.ok(`mutation($id: ID!) { stopDedicatedNode(id: $id) { id } }`, { id: live.nodeId }, u.token);
    await eventually(() => ended || live.payloads.length >= 2, "the change delivered to the other socket");
    assert.equal(ended, false, "the other socket's stream ended");
    const d = await h.ok<{ networks: Json[] }>("{ networks { slug } }");
    assert.equal(d.networks.length, 1);
  });

  it("applies the HTTP limits to every operation; a refused one does not close the socket", async () => {
    const u = await h.signUp();
    const c = client(u.token);
    const run = (query: string) =>
      new Promise<Json>((resolve) => {
        c.subscribe<Json>(
          { query },
          {
            next: (r) => resolve(r as Json),
            error: (e) => resolve({ errors: e }),
            complete: () => undefined,
          },
        );
      });
    const cases: [string, string, RegExp][] = [
      [
        `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: networks { slug }`).join(" ")} }`,
        "GRAPHQL_VALIDATION_FAILED",
        /Aliases limit of 15/,
      ],
      [
        `{ ${"... on Query { ".repeat(12)}networks { slug }${" }".repeat(12)} }`,
        "GRAPHQL_VALIDATION_FAILED",
        /depth limit of 10/,
      ],
      [`{ networks { ${"slug ".repeat(3000)}} }`, "GRAPHQL_PARSE_FAILED", /2000 tokens/],
      [
        `{ usage(filter: {}) { requests24h { series { ${"at ".repeat(1800)}} } } }`,
        "GRAPHQL_VALIDATION_FAILED",
        /Cost limit of 5000/,
      ],
      ["{ __schema { types { name } } }", "GRAPHQL_VALIDATION_FAILED", /introspection/],
      ["{ networks { slug ", "GRAPHQL_PARSE_FAILED", /Syntax Error/],
    ];
    for (const [query, errCode, re] of cases) {
      const r = await run(query);
      assert.ok(Array.isArray(r.errors), JSON.stringify(r).slice(0, 300));
      assert.equal(r.errors[0].extensions.code, errCode, JSON.stringify(r.errors));
      assert.ok(
        r.errors.some((e: Json) => re.test(e.message)),
        JSON.stringify(r.errors),
      );
    }
    const unknown = await run("{ network { slug } }");
    assert.match(unknown.errors[0].message, /Cannot query field "network"/);
    assert.doesNotMatch(JSON.stringify(unknown), /Did you mean/);
    // Same socket, still usable.
    const ok = await run("{ me { id } }");
    assert.equal(ok.data.me.id, u.accountId);
  });

  it("one connection runs at most GRAPHQL_WS_MAX_OPERATIONS (3 here) at once; the next is refused, the socket stays", async () => {
    const u = await h.signUp();
    const { nodeId } = await liveSubscription(u.token, u.workspaceId);
    const c = client(u.token, undefined, false);
    const start = () => {
      const seen: Json[] = [];
      let dispose!: () => void;
      const first = new Promise<Json>((resolve) => {
        dispose = c.subscribe<Json>(
          { query: SUB, variables: { id: nodeId } },
          {
            next: (r) => {
              seen.push(r as Json);
              resolve(r as Json);
            },
            error: (e) => resolve({ errors: e }),
            complete: () => undefined,
          },
        );
      });
      return { first, dispose };
    };
    const running = [start(), start(), start()];
    for (const r of running) assert.equal((await r.first).data.dedicatedNodeStatus.status, "PENDING");
    const refused = await start().first;
    assert.equal(refused.errors[0].extensions.code, "TOO_MANY_REQUESTS", JSON.stringify(refused));
    assert.match(refused.errors[0].message, /At most 3 operations/);
    running[0]!.dispose();
    // The slot comes back once the server has seen the complete: asked until a new one runs.
    await eventually(
      async () => (await start().first).data?.dedicatedNodeStatus?.status === "PENDING",
      "a new operation to run once one of the three was disposed",
    );
  });

  it("a live subscription is closed (4401) as soon as its token is logged out; other tokens' sockets stay", async () => {
    const u = await h.signUp();
    const other = await h.ok<{ createAccessToken: { token: string } }>(
      `mutation { createAccessToken(name: "ci") { token } }`,
      {},
      u.token,
    );
    const live = await liveSubscription(u.token, u.workspaceId);
    const otherClosed: Closed[] = [];
    const c2 = client(other.createAccessToken.token, (e) => otherClosed.push(e), false);
    assert.equal(
      (
        await new Promise<Json>((r) =>
          c2.subscribe({ query: "{ me { id } }" }, { next: r, error: r, complete: () => undefined }),
        )
      ).data.me.id,
      u.accountId,
    );

    assert.equal((await h.ok<{ logOut: boolean }>("mutation { logOut }", {}, u.token)).logOut, true);
    // Closed by the revocation hook (the re-check would say "revoked or expired").
    const closed = await within(live.closed, "close after logOut");
    assert.equal(closed.code, 4401);
    assert.equal(closed.reason, "Unauthorized: token revoked");
    const ended = (await live.ended) as Closed;
    assert.equal(ended.code, 4401);
    // The account's other token (another socket) is untouched, a re-check round later too.
    await recheckRound();
    assert.deepEqual(otherClosed, []);
  });

  it("revokeAccessToken closes that token's sockets at once", async () => {
    const u = await h.signUp();
    const t = await h.ok<{ createAccessToken: { token: string; accessToken: { id: string } } }>(
      `mutation { createAccessToken(name: "bot") { token accessToken { id } } }`,
      {},
      u.token,
    );
    const live = await liveSubscription(t.createAccessToken.token, u.workspaceId);
    await h.ok(
      `mutation($id: ID!) { revokeAccessToken(id: $id) { id revokedAt } }`,
      { id: t.createAccessToken.accessToken.id },
      u.token,
    );
    const closed = await within(live.closed, "close after revokeAccessToken");
    assert.equal(closed.code, 4401);
    assert.equal(closed.reason, "Unauthorized: token revoked");
  });

  it("logOutEverywhere closes every socket of the account (any token) at once; another account's stays", async () => {
    const u = await h.signUp();
    const stranger = await h.signUp();
    const pat = await h.ok<{ createAccessToken: { token: string } }>(
      `mutation { createAccessToken(name: "bot") { token } }`,
      {},
      u.token,
    );
    const live = await liveSubscription(pat.createAccessToken.token, u.workspaceId);
    /** A connected socket (lazy: false) that has answered `{ me { id } }`; resolves its close. */
    const openSocket = async (token: string, accountId: string) => {
      let onClosed!: (e: Closed) => void;
      const closed = new Promise<Closed>((r) => {
        onClosed = r;
      });
      const c = client(token, onClosed, false);
      const first = await new Promise<Json>((r) =>
        c.subscribe({ query: "{ me { id } }" }, { next: r, error: r, complete: () => undefined }),
      );
      assert.equal(first.data.me.id, accountId);
      return { closed };
    };
    const sessionSocket = await openSocket(u.token, u.accountId);
    const strangerClosed: Closed[] = [];
    void (await openSocket(stranger.token, stranger.accountId)).closed.then((e) => strangerClosed.push(e));

    assert.equal((await h.ok("mutation { logOutEverywhere }", {}, u.token)).logOutEverywhere, true);
    for (const [what, p] of [
      ["subscription on the personal token", live.closed],
      ["socket on the session token", sessionSocket.closed],
    ] as const) {
      const closed = await within(p, `close of the ${what}`);
      assert.equal(closed.code, 4401, what);
      assert.equal(closed.reason, "Unauthorized: token revoked", what);
    }
    assert.equal(((await live.ended) as Closed).code, 4401);
    // The re-check runs meanwhile and leaves the other account's socket alone.
    await recheckRound();
    assert.deepEqual(strangerClosed, []);
  });

  /**
   * Resolves once a periodic re-check round has run from now: a canary subscription whose token is expired
   * straight in the database (no revocation hook sees that) is closed by the re-check alone.
   */
  async function recheckRound(): Promise<void> {
    const canary = await h.signUp();
    const live = await liveSubscription(canary.token, canary.workspaceId);
    await h.cp.dataSource.query(
      "UPDATE access_tokens SET expires_at = now() - interval '1 second' WHERE account_id = $1",
      [canary.accountId],
    );
    assert.match(
      (await within(live.closed, "the canary's close by the re-check")).reason,
      /revoked or expired/,
    );
  }

  it("a token that expires, or is revoked elsewhere (another instance, straight in the database), is closed within the re-check period", async () => {
    const u = await h.signUp();
    const live = await liveSubscription(u.token, u.workspaceId);
    const tokenId = (await h.ok<{ accessTokens: { id: string }[] }>("{ accessTokens { id } }", {}, u.token))
      .accessTokens[0]!.id;
    await h.cp.dataSource.query(
      "UPDATE access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
      [tokenId],
    );
    const closed = await within(live.closed, "close after expiry");
    assert.equal(closed.code, 4401);
    assert.match(closed.reason, /revoked or expired/);

    const v = await h.signUp();
    const live2 = await liveSubscription(v.token, v.workspaceId);
    await h.cp.dataSource.query("DELETE FROM access_tokens WHERE account_id = $1", [v.accountId]);
    assert.equal((await within(live2.closed, "close after deletion")).code, 4401);
  });

  it("roles over graphql-ws: a VIEWER's node payload carries the masked key; once removed, its stream ends at the next change", async () => {
    const owner = await h.signUp();
    const viewer = await h.signUp();
    const email = (await h.ok<{ me: { email: string } }>("{ me { email } }", {}, viewer.token)).me.email;
    const inv = await h.ok<{ inviteMember: { token: string } }>(
      `mutation($e: String!) { inviteMember(email: $e, role: VIEWER) { token } }`,
      { e: email },
      owner.token,
    );
    await h.ok(
      `mutation($t: String!) { acceptInvitation(token: $t) { id } }`,
      { t: inv.inviteMember.token },
      viewer.token,
    );
    const live = await liveSubscription(owner.token, owner.workspaceId);
    const key = (
      await h.ok<{ dedicatedNode: { apiKey: string } }>(
        `query($id: ID!) { dedicatedNode(id: $id) { apiKey } }`,
        { id: live.nodeId },
        owner.token,
      )
    ).dedicatedNode.apiKey;
    const c = client(viewer.token);
    const payloads: Json[] = [];
    const ended = new Promise<unknown>((resolve) => {
      c.subscribe<Json>(
        {
          query: `subscription($id: ID!) { dedicatedNodeStatus(id: $id) { id status apiKey apiKeyMasked } }`,
          variables: { id: live.nodeId },
        },
        {
          next: (r) => payloads.push(r as Json),
          error: (e) => resolve(e),
          complete: () => resolve("complete"),
        },
      );
    });
    await eventually(() => payloads.length > 0, "the first payload");
    const first = payloads[0]!.data.dedicatedNodeStatus;
    assert.equal(first.apiKeyMasked, true);
    assert.equal(first.apiKey, `${key.slice(0, 4)}********${key.slice(-4)}`);
    assert.ok(!JSON.stringify(payloads).includes(key));
    // Removed: the next status change is not delivered to it; its stream ends instead.
    const members = (await h.ok<{ members: Json[] }>("{ members { id accountId } }", {}, owner.token))
      .members;
    const viewerMember = members.find((m) => m.accountId === viewer.accountId)!;
    await h.ok(`mutation($m: ID!) { removeMember(memberId: $m) }`, { m: viewerMember.id }, owner.token);
    await h.ok(`mutation($id: ID!) { stopDedicatedNode(id: $id) { id } }`, { id: live.nodeId }, owner.token);
    assert.equal(await within(ended, "the removed member's stream ends"), "complete");
    assert.equal(payloads.length, 1, JSON.stringify(payloads));
    // The owner's own subscription goes on (the stop request is a change: reason and generation).
    await eventually(() => live.payloads.length >= 2, "the owner to see the change");
  });
});
