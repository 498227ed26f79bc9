import { getCreateAddress, Wallet } from "ethers";

/**
 * A chain history with logs spread over many blocks, written identically to any number of anvil nodes (for
 * eth_getLogs tests and the logs-split bench). Everything is deterministic: a fixed genesis timestamp
 * (ANVIL_DETERMINISTIC_ARGS), one second per block (anvil_setBlockTimestampInterval), transactions signed by
 * anvil's first dev account with fixed fees and nonces, so every node gets byte-identical blocks and logs
 * (same hashes), as two archive nodes of one chain would serve.
 */

/** Flags for startAnvil so that two nodes built by LogHistory have the same genesis. */
export const ANVIL_DETERMINISTIC_ARGS = ["--timestamp", "1700000000"] as const;

/** anvil's first dev account (public, well known). */
const DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/** topic0 of every log the emitter writes. */
export const EMIT_TOPIC = `0x${"ab".repeat(32)}`;

/**
 * The emitter contract (hand-assembled; no compiler needed): each call logs one event with topics
 * [EMIT_TOPIC, calldata word 0] and that word as data. Runtime: PUSH1 0 CALLDATALOAD DUP1 PUSH1 0 MSTORE
 * PUSH32 topic PUSH1 32 PUSH1 0 LOG2 STOP; init code copies it out (CODECOPY, RETURN).
 */
const RUNTIME = `600035806000527f${"ab".repeat(32)}60206000a200`;
const EMITTER_INIT = `0x60${(RUNTIME.length / 2).toString(16).padStart(2, "0")}80600b6000396000f3${RUNTIME}`;

/** A 32-byte word as a topic / calldata. */
export const word = (n: number): string => `0x${n.toString(16).padStart(64, "0")}`;

export async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const j = (await res.json()) as { result?: unknown; error?: unknown };
  if (j.error !== undefined) throw new Error(`${method}: ${JSON.stringify(j.error)}`);
  return j.result;
}

export class LogHistory {
  private readonly wallet = new Wallet(DEV_KEY);
  private nonce = 0;
  /** Emitter contract addresses, in deployment order. */
  readonly emitters: string[] = [];

  /** `urls`: nodes started with ANVIL_DETERMINISTIC_ARGS and nothing sent to them yet. */
  constructor(private readonly urls: readonly string[]) {}

  /** Sets the one-second block interval everywhere (before anything else). */
  async init(): Promise<void> {
    for (const u of this.urls) await rpc(u, "anvil_setBlockTimestampInterval", [1]);
  }

  private sign(to: string | null, data: string): Promise<string> {
    return this.wallet.signTransaction({
      type: 2,
      chainId: 31337,
      nonce: this.nonce++,
      to,
      data,
      gasLimit: 200_000,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
      value: 0,
    });
  }

  /** Deploys one more emitter (one block) and returns its address. */
  async deployEmitter(): Promise<string> {
    const address = getCreateAddress({ from: this.wallet.address, nonce: this.nonce }).toLowerCase();
    const raw = await this.sign(null, EMITTER_INIT);
    for (const u of this.urls) await rpc(u, "eth_sendRawTransaction", [raw]);
    this.emitters.push(address);
    return address;
  }

  /**
   * One block holding one emit per value (in this order: logIndex 0, 1, ...) from emitters[emitter];
   * several values make a block with several logs.
   */
  async emitBlock(emitter: number, values: readonly number[]): Promise<void> {
    const raws: string[] = [];
    for (const v of values) raws.push(await this.sign(this.emitters[emitter]!, word(v)));
    for (const u of this.urls) {
      if (raws.length === 1) {
        await rpc(u, "eth_sendRawTransaction", [raws[0]]);
        continue;
      }
      await rpc(u, "evm_setAutomine", [false]);
      for (const raw of raws) await rpc(u, "eth_sendRawTransaction", [raw]);
      await rpc(u, "anvil_mine", ["0x1"]);
      await rpc(u, "evm_setAutomine", [true]);
    }
  }

  /** Mines `n` empty blocks everywhere. */
  async mine(n: number): Promise<void> {
    if (n <= 0) return;
    for (const u of this.urls) await rpc(u, "anvil_mine", [`0x${n.toString(16)}`]);
  }

  /** The head height (same on every node). */
  async head(): Promise<number> {
    const heads = await Promise.all(this.urls.map((u) => rpc(u, "eth_blockNumber")));
    const set = new Set(heads);
    if (set.size !== 1) throw new Error(`nodes disagree on the head: ${[...set].join(", ")}`);
    return Number.parseInt(String(heads[0]), 16);
  }
}
