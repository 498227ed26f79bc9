import assert from "node:assert/strict";
import { FetchRequest, type FetchResponse, JsonRpcProvider, Network } from "ethers";
import {
  createPublicClient,
  http,
  InternalRpcError,
  InvalidParamsRpcError,
  LimitExceededRpcError,
  MethodNotFoundRpcError,
  RpcRequestError,
} from "viem";
import { foundry } from "viem/chains";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { CountingProxy } from "../../helpers/counting-proxy";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, startGateway } from "./harness";

/**
 * What ethers v6 and viem surface for each kind of gateway error, and how often they retry, counted by a
 * loopback proxy between the client and the gateway (docs/clients.md documents the results and the
 * settings recommended there; the "configured" cases below run those settings).
 */

const ADDRESS = "0x000000000000000000000000000000000000dEaD";

// biome-ignore lint/suspicious/noExplicitAny: the clients' errors are inspected field by field
type AnyError = any;

async function rejection(p: Promise<unknown>): Promise<AnyError> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail("expected the call to fail");
}

/** The gateway's JSON-RPC error object inside an ethers SERVER_ERROR (the body of a non-2xx answer). */
function ethersBodyError(e: AnyError): { code: number; message: string; data: Record<string, unknown> } {
  assert.equal(e.code, "SERVER_ERROR");
  return JSON.parse(e.info.responseBody).error;
}

/**
 * The ethers retry policy docs/clients.md recommends: Retry-After is in seconds (ethers would read it as
 * milliseconds); wait it out at most `maxRetries` times, and give up at once when it is longer than
 * `maxWaitS` (a daily or monthly quota: retrying before its reset cannot succeed).
 */
function retryAfterSeconds(maxRetries: number, maxWaitS: number, wait: (ms: number) => Promise<void>) {
  return async (_req: FetchRequest, resp: FetchResponse, attempt: number): Promise<boolean> => {
    const seconds = Number(resp.headers["retry-after"]);
    if (!Number.isInteger(seconds) || seconds > maxWaitS || attempt >= maxRetries) return false;
    await wait(seconds * 1000);
    return true;
  };
}

/**
 * The viem fetch docs/clients.md recommends: viem waits a 429's Retry-After before each of its retries,
 * which for a quota is the time to its reset (hours); past `maxWaitS` the header is dropped, so viem's own
 * short backoff applies and the call fails within a second or two.
 */
function capRetryAfter(maxWaitS: number): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    const after = Number(res.headers.get("retry-after"));
    if (res.status !== 429 || !(after > maxWaitS)) return res;
    const headers = new Headers(res.headers);
    headers.delete("retry-after");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  };
}

describe("real clients on the gateway's error paths (ethers v6, viem)", function () {
  this.timeout(120_000);
  let anvil: Anvil;
  let gw: Gateway;
  let proxy: CountingProxy;
  const keys = { ok: "", ip: "", tiny: "", daily: "" };

  before(async () => {
    anvil = await startAnvil();
    const closed = await freePort();
    // Once open, the down node's breaker stays open for the whole file (no half-open call answered 502).
    const env = { RATE_LIMIT_MODE: "local", QUOTA_MODE: "local", BREAKER_COOLDOWN_MS: "600000" };
    gw = await startGateway(env, async (s) => {
      await s.putNetwork({
        ...evmNetwork("eth", [{ id: "anvil", httpUrl: anvil.httpUrl }]),
        maxLogsBlockRange: 10,
      });
      // Nothing listens on that port: every call is a Node Error.
      await s.putNetwork(evmNetwork("down", [{ id: "gone", httpUrl: `http://127.0.0.1:${closed}` }]));
      const big = {
        name: "big",
        requestsPerSecond: 10_000,
        dailyRequestLimit: 10_000_000,
        monthlyRequestLimit: null,
      };
      keys.ok = await s.putKey({ workspaceId: "ws-ok", plan: big });
      keys.ip = await s.putKey({
        workspaceId: "ws-ip",
        plan: big,
        allowlist: { origins: [], ips: ["127.0.0.2/32"] },
      });
      // A batch of 2 is larger than 1 request/s: refused whole (429 + Retry-After) every time it is sent.
      keys.tiny = await s.putKey({
        workspaceId: "ws-tiny",
        plan: { ...big, name: "tiny", requestsPerSecond: 1 },
      });
      keys.daily = await s.putKey({
        workspaceId: "ws-daily",
        plan: { ...big, name: "day", dailyRequestLimit: 1 },
      });
    });
    // The down network's node fails every call: answers are 502 until its breaker opens, 503 from then on.
    // Driven open here, so that the Node Error cases below meet one steady answer (whatever the health
    // checks' timing).
    const down = gw.plane.context.upstreams.get("down")!;
    await eventually(async () => {
      await fetch(`${gw.base}/down/rpc?apikey=${keys.ok}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
      });
      return down.describe().every((u) => u.breakerOpen);
    }, "the down network's breaker open");
    proxy = await new CountingProxy(gw.base).start();
    // The daily key's one request of the day: every later one is refused until 00:00 UTC.
    const first = await fetch(`${gw.base}/eth/rpc?apikey=${keys.daily}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
    });
    assert.equal(first.status, 200);
  });

  beforeEach(() => proxy.clear());

  after(async () => {
    await proxy?.stop();
    await gw?.stop();
    await anvil?.stop();
  });

  /** Statuses of what the proxy passed on, in order. */
  const sent = () => proxy.exchanges.map((x) => x.status);

  describe("ethers v6 JsonRpcProvider, defaults (staticNetwork)", () => {
    const provider = (path: string) =>
      new JsonRpcProvider(new FetchRequest(`${proxy.base}${path}`), Network.from(31337), {
        staticNetwork: true,
      });

    it("401 unknown key: SERVER_ERROR 'server response 401', the error object only in info.responseBody", async () => {
      const p = provider("/eth/rpc?apikey=rpcg_unknown");
      const e = await rejection(p.getBlockNumber());
      p.destroy();
      assert.equal(e.shortMessage, "server response 401 Unauthorized");
      const err = ethersBodyError(e);
      assert.equal(err.code, -32016);
      assert.equal(err.data.reason, "unknown_key");
      // The key in the query string ends up in the error's text (and so in logs).
      assert.match(e.message, /apikey=rpcg_unknown/);
      assert.deepEqual(sent(), [401]);
    });

    it("403 allowlist: SERVER_ERROR 'server response 403', not retried", async () => {
      const p = provider(`/eth/rpc?apikey=${keys.ip}`);
      const e = await rejection(p.getBlockNumber());
      p.destroy();
      assert.equal(e.shortMessage, "server response 403 Forbidden");
      assert.equal(ethersBodyError(e).data.reason, "ip_not_allowed");
      assert.deepEqual(sent(), [403]);
    });

    it("429 + Retry-After: 1: read as 1 ms, retried 11 times at once, then 'exceeded maximum retry limit'", async () => {
      const p = provider(`/eth/rpc?apikey=${keys.tiny}`);
      // Two calls in one tick go out as one batch of 2.
      const [a, b] = await Promise.allSettled([p.getBlockNumber(), p.getBalance(ADDRESS)]);
      p.destroy();
      assert.equal(a.status, "rejected");
      assert.equal(b.status, "rejected");
      const e = (a as PromiseRejectedResult).reason;
      assert.equal(e.shortMessage, "exceeded maximum retry limit");
      const err = ethersBodyError(e);
      assert.equal(err.code, -32005);
      assert.equal(err.data.reason, "rate_limit");
      assert.equal(sent().length, 12, `requests: ${sent()}`);
      assert.ok(proxy.exchanges.every((x) => x.status === 429 && x.retryAfter === "1"));
    });

    it("blocked method: 200 with the error object, UNKNOWN_ERROR 'could not coalesce error', error in e.error", async () => {
      const p = provider(`/eth/rpc?apikey=${keys.ok}`);
      const e = await rejection(p.send("admin_peers", []));
      p.destroy();
      assert.equal(e.code, "UNKNOWN_ERROR");
      assert.equal(e.error.code, -32601);
      assert.equal(e.error.data.reason, "method_blocked");
      assert.match(e.error.message, /admin_peers/);
      assert.deepEqual(sent(), [200]);
    });

    it("eth_getLogs range: SERVER_ERROR 'server response 400', -32602 in info.responseBody", async () => {
      const p = provider(`/eth/rpc?apikey=${keys.ok}`);
      const e = await rejection(p.getLogs({ fromBlock: 0, toBlock: 100 }));
      p.destroy();
      assert.equal(e.shortMessage, "server response 400 Bad Request");
      const err = ethersBodyError(e);
      assert.equal(err.code, -32602);
      assert.equal(err.data.reason, "logs_range_too_large");
      assert.equal(err.data.limit, 10);
      assert.deepEqual(sent(), [400]);
    });

    it("Node Error (no upstream answers): SERVER_ERROR 'server response 503', not retried", async () => {
      const p = provider(`/down/rpc?apikey=${keys.ok}`);
      const e = await rejection(p.getBlockNumber());
      p.destroy();
      assert.equal(e.shortMessage, "server response 503 Service Unavailable");
      const err = ethersBodyError(e);
      assert.equal(err.code, -32603);
      assert.equal(err.data.category, "Node Error");
      assert.deepEqual(sent(), [503]);
    });
  });

  describe("ethers v6, configured as docs/clients.md recommends", () => {
    /** The waits the retry policy asked for (ms): recorded, not slept (docs/clients.md sleeps them). */
    const waits: number[] = [];
    const recordWait = async (ms: number) => {
      waits.push(ms);
    };
    beforeEach(() => {
      waits.length = 0;
    });
    const provider = (path: string, key: string) => {
      const req = new FetchRequest(`${proxy.base}${path}`);
      req.setHeader("apikey", key);
      req.retryFunc = retryAfterSeconds(1, 10, recordWait);
      return new JsonRpcProvider(req, Network.from(31337), { staticNetwork: true });
    };

    it("the key in a header: served, and absent from an error's text", async () => {
      const p = provider("/eth/rpc", keys.ok);
      assert.equal(typeof (await p.getBlockNumber()), "number");
      p.destroy();
      const bad = provider("/eth/rpc", "rpcg_unknown");
      const e = await rejection(bad.getBlockNumber());
      bad.destroy();
      assert.equal(ethersBodyError(e).data.reason, "unknown_key");
      assert.doesNotMatch(e.message, /rpcg_unknown/);
      assert.ok(proxy.exchanges.every((x) => !x.url.includes("apikey")));
    });

    it("429 rate_limit: waits Retry-After in seconds, retries once, then surfaces the 429", async () => {
      const p = provider("/eth/rpc", keys.tiny);
      const [a] = await Promise.allSettled([p.getBlockNumber(), p.getBalance(ADDRESS)]);
      p.destroy();
      const e = (a as PromiseRejectedResult).reason;
      assert.equal(e.shortMessage, "server response 429 Too Many Requests");
      assert.equal(ethersBodyError(e).data.reason, "rate_limit");
      assert.deepEqual(sent(), [429, 429]);
      assert.deepEqual(waits, [1000], "Retry-After: 1 waited as one second, once");
    });

    // (In the last 10 s of a UTC day the reset is nearer than the 10 s cap: these two cases would retry.)
    it("429 daily_limit: Retry-After runs to the UTC day's reset, so no retry at all", async () => {
      const p = provider("/eth/rpc", keys.daily);
      const e = await rejection(p.getBlockNumber());
      p.destroy();
      const err = ethersBodyError(e);
      assert.equal(err.data.reason, "daily_limit");
      assert.ok(Number(proxy.exchanges[0]!.retryAfter) > 0);
      assert.deepEqual(sent(), [429]);
      assert.deepEqual(waits, [], "a wait past the cap is not waited");
    });
  });

  describe("viem http transport, defaults", () => {
    const client = (path: string, batch = false) =>
      createPublicClient({
        chain: foundry,
        transport: http(`${proxy.base}${path}`, batch ? { batch: { wait: 20 } } : {}),
      });

    it("401 unknown key: RpcRequestError with the gateway's code and message, not retried", async () => {
      const e = await rejection(client("/eth/rpc?apikey=rpcg_unknown").getBlockNumber({ cacheTime: 0 }));
      assert.ok(e instanceof RpcRequestError, e?.constructor?.name);
      assert.equal(e.code, -32016);
      assert.equal(e.status, 401);
      assert.equal(e.details, "Unauthorized: API key unknown");
      assert.deepEqual(sent(), [401]);
    });

    it("403 allowlist: RpcRequestError, retried 3 times (viem retries every 403)", async () => {
      const e = await rejection(client(`/eth/rpc?apikey=${keys.ip}`).getBlockNumber({ cacheTime: 0 }));
      assert.ok(e instanceof RpcRequestError, e?.constructor?.name);
      assert.equal(e.code, -32016);
      assert.equal(e.status, 403);
      assert.deepEqual(sent(), [403, 403, 403, 403]);
    });

    it("429 + Retry-After: 1: LimitExceededRpcError after 3 retries, each after Retry-After seconds", async () => {
      const c = client(`/eth/rpc?apikey=${keys.tiny}`, true);
      const [a] = await Promise.allSettled([
        c.getBlockNumber({ cacheTime: 0 }),
        c.getBalance({ address: ADDRESS }),
      ]);
      const e = (a as PromiseRejectedResult).reason;
      assert.ok(e instanceof LimitExceededRpcError, e?.constructor?.name);
      assert.equal(e.code, -32005);
      assert.match(e.details, /batch larger than the rate limit/);
      // The two calls are retried together, as one batch each time.
      assert.deepEqual(sent(), [429, 429, 429, 429]);
      assert.ok(proxy.exchanges.every((x) => x.retryAfter === "1" && JSON.parse(x.body).length === 2));
    });

    it("blocked method: MethodNotFoundRpcError with the gateway's message, not retried", async () => {
      const e = await rejection(
        client(`/eth/rpc?apikey=${keys.ok}`).request({ method: "admin_peers" } as never),
      );
      assert.ok(e instanceof MethodNotFoundRpcError, e?.constructor?.name);
      assert.equal(e.code, -32601);
      assert.match(e.details, /admin_peers is not available on shared nodes/);
      assert.deepEqual(sent(), [200]);
    });

    it("eth_getLogs range: InvalidParamsRpcError with the gateway's message, not retried", async () => {
      const e = await rejection(
        client(`/eth/rpc?apikey=${keys.ok}`).getLogs({ fromBlock: 0n, toBlock: 100n }),
      );
      assert.ok(e instanceof InvalidParamsRpcError, e?.constructor?.name);
      assert.equal(e.code, -32602);
      assert.equal(e.details, "eth_getLogs block range too large: 101 blocks, max range 10");
      assert.deepEqual(sent(), [400]);
    });

    it("Node Error: InternalRpcError after 3 retries (viem retries -32603 and 5xx)", async () => {
      const e = await rejection(client(`/down/rpc?apikey=${keys.ok}`).getBlockNumber({ cacheTime: 0 }));
      assert.ok(e instanceof InternalRpcError, e?.constructor?.name);
      assert.equal(e.code, -32603);
      assert.deepEqual(sent(), [503, 503, 503, 503]);
    });
  });

  describe("viem, configured as docs/clients.md recommends", () => {
    const client = (key: string) =>
      createPublicClient({
        chain: foundry,
        transport: http(`${proxy.base}/eth/rpc`, {
          fetchOptions: { headers: { apikey: key } },
          fetchFn: capRetryAfter(10),
        }),
      });

    it("the key in a header: served, and absent from an error's text", async () => {
      assert.equal(typeof (await client(keys.ok).getBlockNumber({ cacheTime: 0 })), "bigint");
      const e = await rejection(client("rpcg_unknown").getBlockNumber({ cacheTime: 0 }));
      assert.equal(e.code, -32016);
      assert.doesNotMatch(e.message, /rpcg_unknown/);
      assert.ok(proxy.exchanges.every((x) => !x.url.includes("apikey")));
    });

    it("429 daily_limit: fails after viem's short backoff instead of waiting for the reset", async () => {
      const e = await rejection(client(keys.daily).getBlockNumber({ cacheTime: 0 }));
      assert.ok(e instanceof LimitExceededRpcError, e?.constructor?.name);
      assert.equal(e.details, "Too many requests: daily limit reached");
      assert.deepEqual(sent(), [429, 429, 429, 429]);
      assert.ok(proxy.exchanges.every((x) => Number(x.retryAfter) > 10));
    });
  });
});
