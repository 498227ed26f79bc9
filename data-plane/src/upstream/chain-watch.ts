import { ExchangeKind, INVALID_REPLY, type Upstream } from "./upstream";

/**
 * The chain watch of one network (NetworkPool): its finalized head, for the finality-aware cache, and the
 * reorgs the health checks can see, for dropping per-block cache entries. Runs after each node's health
 * probe (HEALTH_CHECK_INTERVAL_MS), on ExchangeKind.Poll exchanges (no breaker verdict), when
 * CACHE_FINALITY_ENABLED.
 *
 * Finalized head. Per node: EVM `eth_getBlockByNumber("finalized", false)`, Substrate
 * `chain_getFinalizedHead` + `chain_getHeader(hash)`. A node's value is kept only when it is at or below
 * that node's own head (sane) and never lowered (a node reporting a lower one keeps its old value: finality
 * does not go back; anvil's `evm_revert` does, which is why this matters in tests). A node that answers an
 * error or null (no `finalized` tag, no finalized block yet) has no finalized head. The network's finalized
 * head is the lowest among the nodes a call could go to now (selectable), so every node that may answer a
 * call about a final block has that block final too; it stays unknown (-1: per-block caching, as without
 * this feature) while any of them has none, is never above the network's head, and never goes back, but
 * for one case: a node added to the pool may be on another chain, so the pool then starts afresh (reset).
 *
 * Reorgs, per node, from what a health round sees: its head height (the probe) and the hash of the block at
 * that height (EVM `eth_getBlockByNumber(height)`, Substrate `chain_getBlockHash(height)`).
 * - Detected: the head going back (a rollback, or a reorg onto a shorter branch), and a different hash at
 *   the same height as in the last round (a same-height reorg, the usual one-block reorg on a slot chain).
 *   Either way per-block entries keyed to heads at or above the node's head now are dropped: lookups key
 *   to the current head, so those are the only stale entries a lookup can reach again.
 * - Not detected: a reorg whose new branch is already higher than the last round's head (the head moved
 *   up, so entries keyed to the old heads are out of reach anyway); a reorg and its undoing between two
 *   rounds; a reorg on one node while another is ahead (the network's head, and so the keys, follow the
 *   higher one); answers for the old branch in flight during the reorg, stored just after the drop (they
 *   live at most CACHE_PER_BLOCK_TTL_MS, as every per-block entry did before this watch).
 * - False alarms cost only cache misses: a load balancer rotating between nodes at different heights looks
 *   like heads going back.
 * Finalized (`f`) and permanent entries are never dropped: finality means no reorg there.
 */

/** What the watch tells the pool. */
export interface ChainWatchHooks {
  /** A node's chain reorganised: per-block answers keyed to heads >= `fromHeight` may be stale. */
  reorg(fromHeight: number): void;
}

/** What the watch knows of one node. */
interface NodeChain {
  /** Highest finalized height the node reported (sane ones only); -1 = none / unsupported. */
  finalized: number;
  /** Head height of the last poll (-1 = none yet) and the hash of the block there (undefined = unread). */
  headHeight: number;
  headHash: string | undefined;
  polling: boolean;
}

/** A node's JSON-RPC error answer (vs a result, or no answer at all). */
const RPC_ERROR: unique symbol = Symbol("node error");
type Answer = { readonly result: unknown } | typeof RPC_ERROR | undefined;

export class ChainWatch {
  private readonly nodes = new Map<Upstream, NodeChain>();
  /** The network's finalized head; -1 = unknown. */
  finalized = -1;

  constructor(private readonly hooks: ChainWatchHooks) {}

  /** Forgets every node and the finalized head (a node was added to the pool: see the class comment). */
  reset(): void {
    this.nodes.clear();
    this.finalized = -1;
  }

  /** Forgets nodes that left the pool (their Upstream objects are closed). */
  retain(upstreams: readonly Upstream[]): void {
    for (const u of this.nodes.keys()) if (!upstreams.includes(u)) this.nodes.delete(u);
  }

  /** The finalized height node `u` reported (-1 = none); for diagnostics and tests. */
  nodeFinalized(u: Upstream): number {
    return this.nodes.get(u)?.finalized ?? -1;
  }

  /**
   * Reads `u`'s finalized head and the hash of its head block (at `u.head`, just probed), and reports a
   * reorg it shows. Never throws; at most one poll per node at a time.
   */
  async poll(u: Upstream, substrate: boolean): Promise<void> {
    let s = this.nodes.get(u);
    if (s === undefined) {
      s = { finalized: -1, headHeight: -1, headHash: undefined, polling: false };
      this.nodes.set(u, s);
    }
    const height = u.head;
    if (s.polling || height < 0) return;
    s.polling = true;
    try {
      const seen = substrate ? await pollSubstrate(u, height) : await pollEvm(u, height);
      if (seen.finalized === RPC_ERROR) s.finalized = -1;
      else if (seen.finalized !== undefined && seen.finalized <= height && seen.finalized > s.finalized) {
        s.finalized = seen.finalized;
      }
      const before = s.headHeight;
      const beforeHash = s.headHash;
      if (height !== before) s.headHash = undefined;
      if (seen.headHash !== undefined) s.headHash = seen.headHash;
      s.headHeight = height;
      if (before < 0) return;
      if (
        height < before ||
        (height === before &&
          beforeHash !== undefined &&
          seen.headHash !== undefined &&
          seen.headHash !== beforeHash)
      ) {
        this.hooks.reorg(height);
      }
    } finally {
      s.polling = false;
    }
  }

  /**
   * Moves the network's finalized head up to the lowest finalized head among `live` (the nodes a call
   * could go to), when every one of them has one and it is at or below `networkHead`. Returns whether it
   * moved.
   */
  settle(live: readonly Upstream[], networkHead: number): boolean {
    let low = Number.POSITIVE_INFINITY;
    for (const u of live) {
      const f = this.nodes.get(u)?.finalized ?? -1;
      if (f < 0) return false;
      if (f < low) low = f;
    }
    if (low === Number.POSITIVE_INFINITY || low > networkHead || low <= this.finalized) return false;
    this.finalized = low;
    return true;
  }
}

/** One poll's reading: the finalized height (RPC_ERROR: the node has none; undefined: no answer) and the head hash. */
interface Seen {
  finalized: number | typeof RPC_ERROR | undefined;
  headHash: string | undefined;
}

async function pollEvm(u: Upstream, height: number): Promise<Seen> {
  const [fin, head] = await Promise.all([
    ask(u, '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["finalized",false]}'),
    ask(
      u,
      `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x${height.toString(16)}",false]}`,
    ),
  ]);
  let headHash: string | undefined;
  if (head !== undefined && head !== RPC_ERROR) {
    const b = head.result as { number?: unknown; hash?: unknown } | null;
    if (b !== null && typeof b === "object" && hexNumber(b.number) === height && typeof b.hash === "string") {
      headHash = b.hash;
    }
  }
  return {
    finalized: finalizedOf(fin, (r) => hexNumber((r as { number?: unknown } | null)?.number)),
    headHash,
  };
}

async function pollSubstrate(u: Upstream, height: number): Promise<Seen> {
  const [finHash, head] = await Promise.all([
    ask(u, '{"jsonrpc":"2.0","id":1,"method":"chain_getFinalizedHead","params":[]}'),
    ask(u, `{"jsonrpc":"2.0","id":1,"method":"chain_getBlockHash","params":[${height}]}`),
  ]);
  const headHash =
    head !== undefined && head !== RPC_ERROR && typeof head.result === "string" ? head.result : undefined;
  if (finHash === undefined || finHash === RPC_ERROR) return { finalized: finHash, headHash };
  if (typeof finHash.result !== "string") return { finalized: RPC_ERROR, headHash };
  const header = await ask(
    u,
    `{"jsonrpc":"2.0","id":1,"method":"chain_getHeader","params":[${JSON.stringify(finHash.result)}]}`,
  );
  return {
    finalized: finalizedOf(header, (r) => hexNumber((r as { number?: unknown } | null)?.number)),
    headHash,
  };
}

/** A finalized-block answer as a height: RPC_ERROR for an error, a null or an unreadable result. */
function finalizedOf(a: Answer, height: (result: unknown) => number): number | typeof RPC_ERROR | undefined {
  if (a === undefined || a === RPC_ERROR) return a;
  const n = height(a.result);
  return n < 0 ? RPC_ERROR : n;
}

/** One Poll exchange with `u`: the result, RPC_ERROR for a JSON-RPC error, undefined when there was no answer. */
async function ask(u: Upstream, body: string): Promise<Answer> {
  const r = await u.exchange(body, ExchangeKind.Poll, (reply): Answer | typeof INVALID_REPLY => {
    const v = JSON.parse(reply.text) as unknown;
    if (v === null || typeof v !== "object" || Array.isArray(v)) return INVALID_REPLY;
    const o = v as { result?: unknown; error?: unknown };
    if (o.error !== undefined && o.error !== null) return RPC_ERROR;
    return "result" in o ? { result: o.result } : INVALID_REPLY;
  });
  return r.ok ? r.value : undefined;
}

/** A `0x`-hex quantity as a number; -1 when it is not one (or above 2^53). */
function hexNumber(v: unknown): number {
  if (typeof v !== "string" || !/^0x[0-9a-fA-F]{1,13}$/.test(v)) return -1;
  return Number.parseInt(v.slice(2), 16);
}
