import assert from "node:assert/strict";
import { GATEWAY_REQUEST_HEADERS } from "../../../data-plane/src/server/cors";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";

/** A browser's preflight for a POST that will carry `requestHeaders`. */
function preflight(url: string, origin: string, requestHeaders?: string): Promise<Response> {
  const headers: Record<string, string> = { origin, "access-control-request-method": "POST" };
  if (requestHeaders !== undefined) headers["access-control-request-headers"] = requestHeaders;
  return fetch(url, { method: "OPTIONS", headers });
}

describe("CORS preflight echoes the headers a client asks for", function () {
  this.timeout(30_000);
  let stub: StubUpstream;
  let gw: Gateway;
  let key = "";

  before(async () => {
    stub = await new StubUpstream().start();
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "a", httpUrl: stub.url }]));
      key = await s.putKey();
    });
  });

  after(async () => {
    await gw?.stop();
    await stub?.stop();
  });

  it("an SDK's own headers are allowed on keyed and public endpoints, the gateway's always", async () => {
    for (const url of [`${gw.base}/eth/rpc?apikey=${key}`, `${gw.base}/eth/public`]) {
      const pre = await preflight(
        url,
        "https://dapp.example.com",
        "Content-Type, X-Client-Version, solana-client",
      );
      assert.equal(pre.status, 204, url);
      assert.equal(
        pre.headers.get("access-control-allow-headers"),
        `${GATEWAY_REQUEST_HEADERS}, x-client-version, solana-client`,
      );
      // A cache between the browser and the gateway must key the answer on what was asked.
      assert.match(pre.headers.get("vary") ?? "", /Access-Control-Request-Headers/i);
      // The real request those headers announce is served.
      const r = await post(
        url,
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        {
          origin: "https://dapp.example.com",
          "x-client-version": "sdk/1.2.3",
          "solana-client": "js/1.0",
        },
      );
      assert.equal(r.status, 200);
      assert.match(r.json.result, /^0x[0-9a-f]+$/);
    }
  });

  it("a malformed or oversized list gets the gateway's own headers only", async () => {
    const url = `${gw.base}/eth/rpc?apikey=${key}`;
    for (const asked of ["x-a, bad name", `x-${"a".repeat(2000)}`, "x-(comment)"]) {
      const pre = await preflight(url, "https://dapp.example.com", asked);
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get("access-control-allow-headers"), GATEWAY_REQUEST_HEADERS, asked);
    }
    const none = await preflight(url, "https://dapp.example.com");
    assert.equal(none.headers.get("access-control-allow-headers"), GATEWAY_REQUEST_HEADERS);
  });
});
