import assert from "node:assert/strict";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type SubstrateTestNode, SYSTEM_NUMBER_KEY, startSubstrateTestNode } from "../../substrate-node";
import { type Gateway, post, startGateway } from "./harness";
import { TestWsClient, wsNetwork } from "./ws/ws-client";

/** Runtime code that returns block.number: NUMBER PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN. */
const BLOCK_NUMBER_CODE = "0x4360005260206000f3";
const CONTRACT = "0x00000000000000000000000000000000000b10c0";
/** An account with a balance on the node ahead only. */
const FUNDED = "0x00000000000000000000000000000000000fa11d";

const rpc = (method: string, params?: unknown[], id: number | string = 1) => ({
  jsonrpc: "2.0",
  id,
  method,
  ...(params === undefined ? {} : { params }),
});

/**
 * Calls at the head go to an upstream at the served head (upstream/network-pool.ts rank / headTarget;
 * docs/contracts.md "A head that never goes back"): two real anvil nodes behind one network, one two blocks
 * behind the other. Every eth_call / eth_getBalance / eth_feeHistory at `latest` (or with no block) is
 * answered at the head of the node ahead, over HTTP (single, batch) and WebSocket; with the node ahead gone
 * they are still answered (a preference, not a refusal). Substrate's best block the same, with two
 * Substrate test nodes (the named stand-in).
 */
describe("data plane: calls at the head go to an upstream at the served head (one of two nodes lagging)", function () {
  this.timeout(120_000);

  describe("EVM (two anvils)", () => {
    let ahead: Anvil;
    let behind: Anvil;
    let gw: Gateway;
    let key = "";
    const url = () => `${gw.base}/eth/rpc?apikey=${key}`;

    before(async () => {
      [ahead, behind] = await Promise.all([startAnvil(), startAnvil()]);
      for (const [a, blocks] of [
        [ahead, 12],
        [behind, 10],
      ] as const) {
        await post(a.httpUrl, rpc("anvil_setCode", [CONTRACT, BLOCK_NUMBER_CODE]));
        await post(a.httpUrl, rpc("anvil_mine", [`0x${blocks.toString(16)}`]));
      }
      await post(ahead.httpUrl, rpc("anvil_setBalance", [FUNDED, "0x1234"]));
      gw = await startGateway({ CACHE_MAX_BYTES: "0", HEALTH_CHECK_INTERVAL_MS: "100" }, async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "ahead", httpUrl: ahead.httpUrl },
            { id: "behind", httpUrl: behind.httpUrl },
          ]),
        );
        key = await s.putKey();
      });
      // Until the health checks have seen both nodes' heads.
      const pool = () => gw.plane.context.upstreams.get("eth");
      await eventually(
        () =>
          pool()
            ?.describe()
            .every((u) => u.head >= 0),
        "the health checks seeing both heads",
      );
    });

    after(async () => {
      await gw?.stop();
      await Promise.all([ahead?.stop(), behind?.stop()]);
    });

    /** What the node ahead answers to the same call (the answer every call through the gateway must give). */
    async function direct(method: string, params: unknown[]): Promise<unknown> {
      return (await post(ahead.httpUrl, rpc(method, params))).json.result;
    }

    const calls: [string, unknown[]][] = [
      ["eth_call", [{ to: CONTRACT, data: "0x" }, "latest"]],
      ["eth_call", [{ to: CONTRACT, data: "0x" }]],
      ["eth_getBalance", [FUNDED, "latest"]],
      ["eth_getCode", [CONTRACT, "pending"]],
      ["eth_feeHistory", ["0x1", "latest", []]],
    ];

    it("HTTP: 30 rounds of eth_call / eth_getBalance / eth_feeHistory at latest are answered at the node ahead's head", async () => {
      const want = await Promise.all(calls.map(([m, p]) => direct(m, p)));
      // The node behind answers otherwise: the test would see it.
      const other = (await post(behind.httpUrl, rpc("eth_call", calls[0]![1]))).json.result;
      assert.notDeepEqual(other, want[0]);
      for (let i = 0; i < 30; i++) {
        for (let j = 0; j < calls.length; j++) {
          const [m, p] = calls[j]!;
          const r = await post(url(), rpc(m, p, i));
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(
            r.json.result,
            want[j],
            `round ${i}: ${m} ${JSON.stringify(p)} answered by a node behind`,
          );
        }
      }
    });

    it("HTTP batches: the same", async () => {
      const want = await Promise.all(calls.map(([m, p]) => direct(m, p)));
      for (let i = 0; i < 20; i++) {
        const r = await post(
          url(),
          calls.map(([m, p], j) => rpc(m, p, j)),
        );
        assert.equal(r.status, 200, r.text);
        for (let j = 0; j < calls.length; j++) {
          const el = (r.json as { id: number; result: unknown }[]).find((e) => e.id === j);
          assert.deepEqual(el?.result, want[j], `batch ${i}: ${calls[j]![0]} answered by a node behind`);
        }
      }
    });

    it("WebSocket: the same; and with the node ahead gone, calls at latest are still answered (a preference, not a refusal)", async () => {
      const want = await Promise.all(calls.map(([m, p]) => direct(m, p)));
      const ws = await TestWsClient.open(`${gw.base.replace("http", "ws")}/eth/rpc?apikey=${key}`);
      try {
        for (let i = 0; i < 20; i++) {
          for (let j = 0; j < calls.length; j++) {
            const [m, p] = calls[j]!;
            assert.deepEqual(
              (await ws.call(m, p)).result,
              want[j],
              `WebSocket ${i}: ${m} answered by a node behind`,
            );
          }
        }
        // No node is at the served head any more: the node behind answers.
        await ahead.stop();
        const fromBehind = (await post(behind.httpUrl, rpc("eth_call", calls[0]![1]))).json.result;
        for (let i = 0; i < 10; i++) {
          const r = await post(url(), rpc("eth_call", calls[0]![1], i));
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(r.json.result, fromBehind);
          assert.deepEqual((await ws.call("eth_call", calls[0]![1])).result, fromBehind);
        }
      } finally {
        ws.close();
      }
    });
  });

  describe("Substrate best block (two Substrate test nodes)", () => {
    let ahead: SubstrateTestNode;
    let behind: SubstrateTestNode;
    let gw: Gateway;
    let key = "";

    before(async () => {
      [ahead, behind] = await Promise.all([
        startSubstrateTestNode({ blockTimeMs: 0, startBlock: 12 }),
        startSubstrateTestNode({ blockTimeMs: 0, startBlock: 10 }),
      ]);
      gw = await startGateway({ CACHE_MAX_BYTES: "0", HEALTH_CHECK_INTERVAL_MS: "100" }, async (s) => {
        await s.putNetwork(
          wsNetwork("dot", "SUBSTRATE", [
            { id: "ahead", httpUrl: ahead.httpUrl, wsUrl: null },
            { id: "behind", httpUrl: behind.httpUrl, wsUrl: null },
          ]),
        );
        key = await s.putKey();
      });
      const pool = () => gw.plane.context.upstreams.get("dot");
      await eventually(
        () =>
          pool()
            ?.describe()
            .every((u) => u.head >= 0),
        "the health checks seeing both heads",
      );
    });

    after(async () => {
      await gw?.stop();
      await Promise.all([ahead?.close(), behind?.close()]);
    });

    it("chain_getHeader(), chain_getBlockHash(), chain_getBlock() and state_getStorage without a hash: the best block of the node ahead, 20 times each", async () => {
      const url = `${gw.base}/dot/rpc?apikey=${key}`;
      const calls: [string, unknown[]][] = [
        ["chain_getHeader", []],
        ["chain_getBlockHash", []],
        ["chain_getBlock", []],
        ["state_getStorage", [SYSTEM_NUMBER_KEY]],
      ];
      const want = await Promise.all(
        calls.map(async ([m, p]) => (await post(ahead.httpUrl, rpc(m, p))).json.result),
      );
      const other = (await post(behind.httpUrl, rpc("chain_getBlockHash", []))).json.result;
      assert.notEqual(other, want[1]);
      for (let i = 0; i < 20; i++) {
        for (let j = 0; j < calls.length; j++) {
          const [m, p] = calls[j]!;
          const r = await post(url, rpc(m, p, i));
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(r.json.result, want[j], `round ${i}: ${m} answered by the node behind`);
        }
      }
    });
  });
});
