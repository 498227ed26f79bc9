import { id as eventTopic, getCreateAddress, Wallet } from "ethers";
import { type Anvil, startAnvil } from "./anvil";
import { eventually } from "./eventually";
import { ANVIL_DETERMINISTIC_ARGS, rpc, word } from "./evm-logs";

/**
 * Two (or more) real anvil nodes that hold the same chain, as two nodes of one network would: a shared
 * genesis (ANVIL_DETERMINISTIC_ARGS), one second per block, and every transaction sent to each node
 * directly (signed here with fixed nonces and fees, in the same order), so every node mines byte-identical
 * blocks (same hashes, same logs). Separate anvils share nothing by themselves: a transaction sent to one
 * only is on that one alone.
 */

/** anvil's first dev account (public, well known); these nodes are this helper's alone. */
const DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/** The emitter's event: `event Emitted(uint256 indexed a, uint256 b)`; every call logs its calldata word as both. */
export const EMITTED_EVENT = "event Emitted(uint256 indexed a, uint256 b)";
export const EMITTED_ABI = [
  {
    type: "event",
    name: "Emitted",
    inputs: [
      { name: "a", type: "uint256", indexed: true },
      { name: "b", type: "uint256", indexed: false },
    ],
  },
] as const;

/**
 * Runtime (hand-assembled): PUSH1 0 CALLDATALOAD DUP1 PUSH1 0 MSTORE PUSH32 topic0 PUSH1 32 PUSH1 0 LOG2
 * STOP: topics [keccak("Emitted(uint256,uint256)"), word], data word.
 */
function emitterInit(): string {
  const topic = eventTopic("Emitted(uint256,uint256)").slice(2);
  const runtime = `600035806000527f${topic}60206000a200`;
  return `0x60${(runtime.length / 2).toString(16).padStart(2, "0")}80600b6000396000f3${runtime}`;
}

export class TwinChain {
  readonly nodes: Anvil[] = [];
  private readonly wallet = new Wallet(DEV_KEY);
  private nonce = 0;
  emitter = "";
  private readonly stopped = new Set<Anvil>();

  /** Starts `n` nodes (stopped by `stop`), sets the block interval, deploys the emitter. */
  static async start(n = 2): Promise<TwinChain> {
    const c = new TwinChain();
    try {
      for (let i = 0; i < n; i++) c.nodes.push(await startAnvil({ args: ANVIL_DETERMINISTIC_ARGS }));
      for (const a of c.nodes) await rpc(a.httpUrl, "anvil_setBlockTimestampInterval", [1]);
      c.emitter = getCreateAddress({ from: c.wallet.address, nonce: 0 }).toLowerCase();
      await c.sendEverywhere(await c.sign(null, emitterInit()));
    } catch (err) {
      await c.stop();
      throw err;
    }
    return c;
  }

  get urls(): string[] {
    return this.nodes.filter((a) => !this.stopped.has(a)).map((a) => a.httpUrl);
  }

  private sign(to: string | null, data: string): Promise<string> {
    return this.wallet.signTransaction({
      type: 2,
      chainId: 31337,
      nonce: this.nonce++,
      to,
      data,
      gasLimit: 100_000,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
      value: 0,
    });
  }

  private async sendEverywhere(raw: string): Promise<void> {
    for (const u of this.urls) await rpc(u, "eth_sendRawTransaction", [raw]);
  }

  /** One block per value, each with one Emitted(value, value) log. */
  async emit(...values: number[]): Promise<void> {
    for (const v of values) await this.sendEverywhere(await this.sign(this.emitter, word(v)));
  }

  /** `n` empty blocks on every node. */
  async mine(n: number): Promise<void> {
    for (const u of this.urls) await rpc(u, "anvil_mine", [`0x${n.toString(16)}`]);
  }

  /**
   * The head, once every live node has it: anvil answers eth_sendRawTransaction before its automine has
   * mined the block, so right after `emit` a node may still be one block behind.
   */
  async head(): Promise<number> {
    let heads = new Set<unknown>();
    await until(
      async () => {
        heads = new Set(await Promise.all(this.urls.map((u) => rpc(u, "eth_blockNumber"))));
        return heads.size === 1;
      },
      5_000,
      "the nodes to agree on the head",
    );
    return Number.parseInt(String([...heads][0]), 16);
  }

  /** Block hashes from..to (inclusive) as node 0 has them. */
  async hashes(from: number, to: number): Promise<string[]> {
    const out: string[] = [];
    for (let n = from; n <= to; n++) {
      const b = (await rpc(this.urls[0]!, "eth_getBlockByNumber", [`0x${n.toString(16)}`, false])) as {
        hash: string;
      };
      out.push(b.hash);
    }
    return out;
  }

  /** Stops node `i` (by PID); the others go on mining what `emit` / `mine` send. */
  async stopNode(i: number): Promise<void> {
    const a = this.nodes[i]!;
    this.stopped.add(a);
    await a.stop();
  }

  async stop(): Promise<void> {
    for (const a of this.nodes) await a.stop();
  }
}

/** Waits until `check` returns true; throws after `ms` (test/helpers/eventually.ts). */
export async function until(
  check: () => Promise<boolean> | boolean,
  ms = 10_000,
  what = "condition",
): Promise<void> {
  await eventually(check, what, ms);
}
