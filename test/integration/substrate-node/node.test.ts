import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { startProcess } from "../../helpers/process";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../substrate-node/node";
import { decodeAccountIdVec, decodeValidatorPrefs, fromHex, toHex } from "../../substrate-node/scale";
import {
  SESSION_VALIDATORS_KEY,
  SYSTEM_NUMBER_KEY,
  ss58Encode,
  stakingValidatorsKey,
} from "../../substrate-node/storage-keys";

// biome-ignore lint/suspicious/noExplicitAny: parsed JSON-RPC payloads, checked by the assertions
type Json = any;

const ALICE = "0xd43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d";
const BOB = "0x8eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a48";
const HASH = /^0x[0-9a-f]{64}$/;

async function rpc(
  url: string,
  method: string,
  params?: unknown[],
): Promise<{ result?: Json; error?: Json }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  assert.equal(res.status, 200);
  return (await res.json()) as { result?: Json; error?: Json };
}

async function call(url: string, method: string, params?: unknown[]): Promise<Json> {
  const r = await rpc(url, method, params);
  if (r.error) throw new Error(`${method}: ${JSON.stringify(r.error)}`);
  return r.result;
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  await eventually(cond, "the condition", timeoutMs);
}

/** A WebSocket client that collects notifications per subscription id. */
class WsClient {
  private nextId = 1;
  private pending = new Map<number, (msg: Json) => void>();
  readonly notes: Json[] = [];
  constructor(readonly ws: WebSocket) {
    ws.on("message", (d) => {
      const msg = JSON.parse(d.toString());
      if (msg.id !== undefined && this.pending.has(msg.id)) {
        this.pending.get(msg.id)!(msg);
        this.pending.delete(msg.id);
      } else if (msg.method) this.notes.push(msg);
    });
  }
  static async open(url: string): Promise<WsClient> {
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    return new WsClient(ws);
  }
  request(method: string, params?: unknown[]): Promise<Json> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
  of(sub: string) {
    return this.notes.filter((n) => n.params?.subscription === sub);
  }
  close() {
    this.ws.close();
  }
}

describe("substrate test node (stand-in)", function () {
  this.timeout(30_000);

  describe("over HTTP", () => {
    let node: SubstrateTestNode;
    before(async () => {
      node = await startSubstrateTestNode({
        blockTimeMs: 0,
        startBlock: 10,
        rpcMethods: "Safe",
        chain: "polkadot",
      });
    });
    after(() => node.close());

    it("answers system_* with the real shapes", async () => {
      assert.deepEqual(await call(node.httpUrl, "system_health"), {
        peers: 8,
        isSyncing: false,
        shouldHavePeers: true,
      });
      assert.deepEqual(await call(node.httpUrl, "system_syncState"), {
        startingBlock: 10,
        currentBlock: 10,
        highestBlock: 10,
      });
      assert.equal(await call(node.httpUrl, "system_chain"), "Polkadot");
      assert.equal(typeof (await call(node.httpUrl, "system_name")), "string");
      assert.equal(typeof (await call(node.httpUrl, "system_version")), "string");
      assert.deepEqual(await call(node.httpUrl, "system_properties"), {
        ss58Format: 0,
        tokenDecimals: 10,
        tokenSymbol: "DOT",
      });
      const methods = await call(node.httpUrl, "rpc_methods");
      assert.ok(methods.methods.includes("author_rotateKeys"));
      assert.ok(methods.methods.includes("chain_subscribeNewHeads"));
    });

    it("answers chain_* with deterministic hashes and hex block numbers", async () => {
      const h10 = await call(node.httpUrl, "chain_getBlockHash", [10]);
      assert.match(h10, HASH);
      assert.equal(await call(node.httpUrl, "chain_getBlockHash"), h10);
      assert.equal(await call(node.httpUrl, "chain_getBlockHash", ["0xa"]), h10);
      assert.equal(await call(node.httpUrl, "chain_getBlockHash", [11]), null);
      assert.deepEqual(await call(node.httpUrl, "chain_getBlockHash", [[9, 10]]), [node.blockHash(9), h10]);
      const header = await call(node.httpUrl, "chain_getHeader", [h10]);
      assert.equal(header.number, "0xa");
      assert.equal(header.parentHash, await call(node.httpUrl, "chain_getBlockHash", [9]));
      assert.match(header.stateRoot, HASH);
      assert.match(header.extrinsicsRoot, HASH);
      assert.ok(Array.isArray(header.digest.logs));
      assert.deepEqual(await call(node.httpUrl, "chain_getHeader"), header);
      assert.equal(await call(node.httpUrl, "chain_getHeader", [`0x${"11".repeat(32)}`]), null);
      const block = await call(node.httpUrl, "chain_getBlock", [h10]);
      assert.deepEqual(block.block.header, header);
      assert.ok(block.block.extrinsics[0].startsWith("0x280403000b"), "timestamp inherent first");
      assert.equal(block.justifications, null);
      assert.equal(await call(node.httpUrl, "chain_getFinalizedHead"), node.blockHash(8));
      const rv = await call(node.httpUrl, "state_getRuntimeVersion");
      assert.equal(rv.specName, "polkadot");
      assert.equal(typeof rv.specVersion, "number");
      assert.ok(Array.isArray(rv.apis));
      assert.match(await call(node.httpUrl, "state_getMetadata"), /^0x6d657461/);
    });

    it("answers JSON-RPC errors like jsonrpsee", async () => {
      const r = await rpc(node.httpUrl, "no_suchMethod");
      assert.deepEqual(r.error, { code: -32601, message: "Method not found" });
      const res = await fetch(node.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{not json",
      });
      assert.equal(((await res.json()) as Json).error.code, -32700);
      const notJson = await fetch(node.httpUrl, { method: "POST", body: "{}" });
      assert.equal(notJson.status, 415);
      // Subscriptions need a WebSocket.
      assert.equal((await rpc(node.httpUrl, "chain_subscribeNewHeads")).error.code, -32601);
    });

    it("refuses unsafe methods under --rpc-methods Safe", async () => {
      assert.equal(node.effectiveRpcMethods, "Safe");
      for (const m of ["author_rotateKeys", "author_insertKey", "author_hasSessionKeys", "system_peers"]) {
        const r = await rpc(node.httpUrl, m, []);
        assert.deepEqual(r.error, { code: -32601, message: "RPC call is unsafe to be called externally" }, m);
      }
    });

    it("reads System::Number and the staking/session storage with real keys and SCALE values", async () => {
      assert.equal(await call(node.httpUrl, "state_getStorage", [SYSTEM_NUMBER_KEY]), "0x0a000000");
      assert.equal(
        await call(node.httpUrl, "state_getStorage", [SYSTEM_NUMBER_KEY, node.blockHash(9)]),
        "0x09000000",
      );
      assert.equal(
        (await rpc(node.httpUrl, "state_getStorage", [SYSTEM_NUMBER_KEY, `0x${"22".repeat(32)}`])).error.code,
        4003,
      );
      const aliceKey = stakingValidatorsKey(fromHex(ALICE));
      assert.equal(await call(node.httpUrl, "state_getStorage", [aliceKey]), null);
      assert.equal(await call(node.httpUrl, "state_getStorage", [SESSION_VALIDATORS_KEY]), null);

      // Over RPC (as a test drives a spawned node) and with an SS58 address.
      await call(node.httpUrl, "testnode_setValidatorCandidates", [
        [{ accountId: ss58Encode(fromHex(ALICE), 0), commissionPerbill: 50_000_000 }, BOB],
      ]);
      node.setActiveSet([ALICE]);
      const prefs = await call(node.httpUrl, "state_getStorage", [aliceKey]);
      assert.deepEqual(decodeValidatorPrefs(fromHex(prefs)), {
        commissionPerbill: 50_000_000,
        blocked: false,
      });
      assert.equal(
        await call(node.httpUrl, "state_getStorage", [stakingValidatorsKey(fromHex(BOB))]),
        "0x0000",
      );
      const active = await call(node.httpUrl, "state_getStorage", [SESSION_VALIDATORS_KEY]);
      assert.deepEqual(decodeAccountIdVec(fromHex(active)).map(toHex), [ALICE]);
      const keys = await call(node.httpUrl, "state_getKeysPaged", [
        "0x5f3e4907f716ac89b6347d15ececedca88dcde934c658227ee1dfafcd6e16903",
        10,
      ]);
      assert.equal(keys.length, 2);
      node.setValidatorCandidates([]);
      assert.equal(await call(node.httpUrl, "state_getStorage", [aliceKey]), null);
    });

    it("serves batches and GET /health", async () => {
      const res = await fetch(node.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify([
          { jsonrpc: "2.0", id: "a", method: "system_chain" },
          { jsonrpc: "2.0", method: "system_chain" },
          { jsonrpc: "2.0", id: null, method: "system_health" },
        ]),
      });
      const body = (await res.json()) as Json[];
      assert.deepEqual(
        body.map((r) => r.id),
        ["a", null],
      );
      const health = await fetch(`${node.httpUrl}/health`);
      assert.equal(((await health.json()) as Json).isSyncing, false);
      assert.equal((await fetch(`${node.httpUrl}/health/readiness`)).status, 200);
    });
  });

  describe("author_* under --rpc-methods Unsafe", () => {
    let node: SubstrateTestNode;
    before(async () => {
      node = await startSubstrateTestNode({ blockTimeMs: 0, rpcMethods: "Unsafe" });
    });
    after(() => node.close());

    it("rotates keys, inserts keys and checks session keys", async () => {
      const keys = await call(node.httpUrl, "author_rotateKeys");
      assert.match(keys, /^0x[0-9a-f]{256}$/);
      assert.notEqual(await call(node.httpUrl, "author_rotateKeys"), keys);
      assert.equal(await call(node.httpUrl, "author_hasSessionKeys", [keys]), true);
      assert.equal(await call(node.httpUrl, "author_hasSessionKeys", [`0x${"ab".repeat(128)}`]), false);
      const pub = `0x${"cd".repeat(32)}`;
      assert.equal(await call(node.httpUrl, "author_insertKey", ["gran", "//Alice", pub]), null);
      assert.equal(await call(node.httpUrl, "author_hasKey", [pub, "gran"]), true);
      assert.equal(node.keystore().length, 9);
    });

    it("submits extrinsics and reports ready/inBlock/finalized to a watcher", async () => {
      const hash = await call(node.httpUrl, "author_submitExtrinsic", ["0x1234"]);
      assert.match(hash, HASH);
      assert.deepEqual(await call(node.httpUrl, "author_pendingExtrinsics"), ["0x1234"]);
      const c = await WsClient.open(node.wsUrl);
      try {
        const sub = await c.request("author_submitAndWatchExtrinsic", ["0xabcd"]);
        assert.equal(typeof sub.result, "string");
        await until(() => c.of(sub.result).length === 1);
        assert.equal(c.of(sub.result)[0].method, "author_extrinsicUpdate");
        assert.equal(c.of(sub.result)[0].params.result, "ready");
        node.produceBlocks(1);
        const included = node.bestNumber();
        await until(() => c.of(sub.result).length === 2);
        assert.deepEqual(c.of(sub.result)[1].params.result, { inBlock: node.blockHash(included) });
        const block = await call(node.httpUrl, "chain_getBlock", [node.blockHash(included)]);
        assert.deepEqual(block.block.extrinsics.slice(1), ["0x1234", "0xabcd"]);
        node.produceBlocks(2);
        await until(() => c.of(sub.result).length === 3);
        assert.deepEqual(c.of(sub.result)[2].params.result, { finalized: node.blockHash(included) });
      } finally {
        c.close();
      }
    });
  });

  describe("subscriptions over WebSocket", () => {
    let node: SubstrateTestNode;
    before(async () => {
      node = await startSubstrateTestNode({ blockTimeMs: 100 });
    });
    after(() => node.close());

    it("sends chain_newHead notifications over time and stops after unsubscribe", async () => {
      const c = await WsClient.open(node.wsUrl);
      try {
        const sub = await c.request("chain_subscribeNewHeads");
        const id = sub.result as string;
        assert.match(id, /^[A-Za-z0-9]{16}$/);
        await until(() => c.of(id).length >= 4);
        const notes = c.of(id);
        for (const n of notes) {
          assert.equal(n.jsonrpc, "2.0");
          assert.equal(n.method, "chain_newHead");
          assert.match(n.params.result.parentHash, HASH);
        }
        const numbers = notes.map((n) => Number.parseInt(n.params.result.number, 16));
        for (let i = 1; i < numbers.length; i++) assert.equal(numbers[i], numbers[i - 1]! + 1);
        assert.deepEqual(await c.request("chain_unsubscribeNewHeads", [id]), {
          jsonrpc: "2.0",
          result: true,
          id: 2,
        });
        const count = c.of(id).length;
        // Two blocks made after the unsubscribe; their notifications would have been sent before the
        // answer to a request sent after them, on the same socket.
        const unsubscribedAt = node.bestNumber();
        await until(() => node.bestNumber() >= unsubscribedAt + 2);
        await c.request("system_chain");
        assert.equal(c.of(id).length, count, "no notification after unsubscribe");
        assert.equal((await c.request("chain_unsubscribeNewHeads", [id])).result, false);
      } finally {
        c.close();
      }
    });

    it("sends finalized heads, all heads, runtime versions and storage changes", async () => {
      const c = await WsClient.open(node.wsUrl);
      try {
        const fin = (await c.request("chain_subscribeFinalizedHeads")).result;
        const all = (await c.request("chain_subscribeAllHeads")).result;
        const rv = (await c.request("state_subscribeRuntimeVersion")).result;
        const st = (await c.request("state_subscribeStorage", [[SYSTEM_NUMBER_KEY, SESSION_VALIDATORS_KEY]]))
          .result;
        await until(() => c.of(fin).length >= 2 && c.of(all).length >= 2 && c.of(st).length >= 2);
        assert.equal(c.of(fin)[0].method, "chain_finalizedHead");
        assert.equal(c.of(all)[0].method, "chain_allHead");
        assert.equal(c.of(rv)[0].method, "state_runtimeVersion");
        assert.equal(c.of(rv)[0].params.result.specVersion, 100);
        const first = c.of(st)[0];
        assert.equal(first.method, "state_storage");
        assert.match(first.params.result.block, HASH);
        assert.deepEqual(first.params.result.changes[1], [SESSION_VALIDATORS_KEY, null]);
        // Later notifications carry only what changed (System::Number every block).
        assert.equal(c.of(st)[1].params.result.changes.length, 1);
        assert.equal(c.of(st)[1].params.result.changes[0][0], SYSTEM_NUMBER_KEY);
        node.setActiveSet([BOB]);
        await until(() =>
          c
            .of(st)
            .some((n) =>
              n.params.result.changes.some((ch: Json) => ch[0] === SESSION_VALIDATORS_KEY && ch[1] !== null),
            ),
        );
        node.setRuntimeVersion({ specVersion: 101 });
        await until(() => c.of(rv).length === 2);
        assert.equal(c.of(rv)[1].params.result.specVersion, 101);
      } finally {
        c.close();
      }
      await until(() => node.wsConnections() === 0);
    });
  });

  describe("sync simulation", () => {
    it("syncs toward the network head, reports isSyncing until caught up, and can fall behind", async () => {
      const node = await startSubstrateTestNode({
        blockTimeMs: 200,
        syncTargetBlock: 300,
        syncBlocksPerSecond: 1000,
      });
      try {
        const h0 = await call(node.httpUrl, "system_health");
        assert.equal(h0.isSyncing, true);
        assert.equal((await fetch(`${node.httpUrl}/health/readiness`)).status, 500);
        const s0 = await call(node.httpUrl, "system_syncState");
        assert.equal(s0.startingBlock, 0);
        assert.ok(s0.highestBlock >= 300);
        await until(async () => (await call(node.httpUrl, "system_health")).isSyncing === false);
        const s1 = await call(node.httpUrl, "system_syncState");
        assert.equal(s1.currentBlock, s1.highestBlock);
        assert.ok(s1.currentBlock >= 300);

        await call(node.httpUrl, "testnode_setSyncPaused", [true]);
        await call(node.httpUrl, "testnode_fallBehind", [500]);
        assert.equal((await call(node.httpUrl, "system_health")).isSyncing, true);
        // Three sync rounds pass without an import.
        const pausedAt = node.bestNumber();
        const rounds = node.syncRounds();
        await until(() => node.syncRounds() >= rounds + 3);
        assert.equal(node.bestNumber(), pausedAt, "paused: nothing imported");
        assert.equal((await call(node.httpUrl, "system_health")).isSyncing, true, "paused: stays behind");
        node.setSyncPaused(false);
        await until(() => !node.isSyncing());
        assert.ok(node.bestNumber() >= 800);
      } finally {
        await node.close();
      }
    });

    it("keeps its best block and keystore in --base-path across restarts", async () => {
      const dir = mkdtempSync(join(tmpdir(), "substrate-test-node-"));
      try {
        const a = await startSubstrateTestNode({
          blockTimeMs: 0,
          startBlock: 42,
          basePath: dir,
          rpcMethods: "Unsafe",
        });
        const keys = await call(a.httpUrl, "author_rotateKeys");
        await a.close();
        const b = await startSubstrateTestNode({ blockTimeMs: 0, basePath: dir, rpcMethods: "Unsafe" });
        try {
          assert.equal(b.bestNumber(), 42);
          assert.equal(await call(b.httpUrl, "author_hasSessionKeys", [keys]), true);
        } finally {
          await b.close();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe("as a separate process (CLI)", () => {
    it("starts with real launch args, prints `listening on <port>`, and stops by PID", async () => {
      const port = await freePort();
      const main = require.resolve("../../substrate-node/main");
      const proc = await startProcess(
        process.execPath,
        [
          main,
          "--rpc-methods",
          "Safe",
          "--rpc-port",
          String(port),
          "--block-time-ms",
          "100",
          "--no-telemetry",
        ],
        { readyLine: new RegExp(`listening on ${port}`) },
      );
      try {
        const url = `http://127.0.0.1:${port}`;
        assert.equal(
          (await rpc(url, "author_rotateKeys")).error.message,
          "RPC call is unsafe to be called externally",
        );
        const n0 = Number.parseInt((await call(url, "chain_getHeader")).number, 16);
        await until(async () => Number.parseInt((await call(url, "chain_getHeader")).number, 16) >= n0 + 2);
      } finally {
        const code = await proc.stop();
        assert.equal(code, 0);
      }
    });

    it("serves author_rotateKeys when launched with --rpc-methods Unsafe", async () => {
      const port = await freePort();
      const main = require.resolve("../../substrate-node/main");
      const proc = await startProcess(
        process.execPath,
        [main, "--rpc-methods", "Unsafe", "--rpc-port", String(port)],
        {
          readyLine: /listening on \d+/,
        },
      );
      try {
        assert.match(await call(`http://127.0.0.1:${port}`, "author_rotateKeys"), /^0x[0-9a-f]{256}$/);
      } finally {
        await proc.stop();
      }
    });
  });
});
