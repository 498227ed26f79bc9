import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import Redis from "ioredis";
import { generateApiKey, hashApiKey } from "../../../shared/src/crypto/api-key";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";

const CHAIN_ID = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };

/**
 * API key formats at the data plane: prefixed keys (rpcg_/rpcn_ + base62 + CRC32 check) and legacy
 * base64url keys both work; a prefixed key whose checksum is wrong is refused 401 before any Redis
 * read. Redis's MONITOR stream shows which key names the data plane reads.
 */
describe("data plane: API key format (prefix + checksum; legacy keys)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  const keys: Record<string, string> = {};
  let monitor: Redis | undefined;
  /** Every argument naming this test's key prefix that Redis saw while monitored. */
  const seen: string[] = [];

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "anvil-1", httpUrl: anvil.httpUrl }]));
      keys.prefixed = await s.putKey();
      keys.legacy = await s.putKey({}, randomBytes(32).toString("base64url"));
    });
  });
  after(async () => {
    monitor?.disconnect();
    await gw?.stop();
    await anvil?.stop();
  });

  /** Starts MONITOR; resolves once Redis has echoed a marker command, so nothing before it is missed. */
  async function startMonitor(): Promise<void> {
    const client = new Redis(TEST_REDIS_URL);
    monitor = await client.monitor();
    client.disconnect();
    const marker = `key-format-marker-${randomBytes(8).toString("hex")}`;
    const echoed = new Promise<void>((resolve) => {
      monitor!.on("monitor", (_time: string, args: string[]) => {
        for (const a of args.map(String)) {
          if (a.includes(gw.ns.prefix)) seen.push(a);
          if (a === marker) resolve();
        }
      });
    });
    const probe = new Redis(TEST_REDIS_URL);
    await probe.exists(marker);
    probe.disconnect();
    await echoed;
  }

  /** Resolves once MONITOR has shown a command naming `name` (the proof that reads are seen). */
  async function sawRead(name: string, ms = 5_000): Promise<boolean> {
    return eventually(() => seen.includes(name), `MONITOR showing ${name}`, ms).catch(() => false);
  }

  it("prefixed and legacy (pre-prefix base64url) keys both work", async () => {
    assert.match(keys.prefixed!, /^rpcg_/);
    for (const k of [keys.prefixed!, keys.legacy!]) {
      const r = await post(`${gw.base}/eth/rpc?apikey=${k}`, CHAIN_ID);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.result, "0x7a69");
      assert.equal((await post(`${gw.base}/eth/rpc`, CHAIN_ID, { apikey: k })).status, 200);
    }
  });

  it("a prefixed key with a wrong checksum is refused 401 without a Redis read; a right one is read", async () => {
    await startMonitor();
    const good = generateApiKey(); // well-formed, never issued
    const last = good[good.length - 1] === "0" ? "1" : "0";
    const bad = good.slice(0, -1) + last;
    const badNode = `rpcn_${"x".repeat(49)}`;
    for (const k of [bad, badNode]) {
      const r = await post(`${gw.base}/eth/rpc?apikey=${k}`, CHAIN_ID);
      assert.equal(r.status, 401, r.text);
      assert.equal(r.json.error.code, GatewayError.UnknownKey.code);
      assert.equal(r.json.error.data.category, GatewayError.UnknownKey.category);
    }
    // The well-formed unknown key is looked up (and refused the same way): MONITOR shows its read.
    const r = await post(`${gw.base}/eth/rpc?apikey=${good}`, CHAIN_ID);
    assert.equal(r.status, 401, r.text);
    assert.ok(await sawRead(gw.seeder.names.apiKey(hashApiKey(good))), "the control read was seen");
    for (const k of [bad, badNode]) {
      assert.ok(!seen.includes(gw.seeder.names.apiKey(hashApiKey(k))), `no Redis read for ${k.slice(0, 8)}…`);
    }
    // The gateway is still up and serving.
    assert.equal((await post(`${gw.base}/eth/rpc?apikey=${keys.prefixed}`, CHAIN_ID)).status, 200);
  });
});
