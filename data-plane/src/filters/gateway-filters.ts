import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { maxLogsBlockRange } from "../../../shared/src/redis/records";
import type { RpcCall } from "../rpc/parse";
import type { NetworkPool, OutgoingCall } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { Advance, FilterKind, type FilterRecord, type FilterStore } from "./filter-store";

/** The methods the gateway answers itself on a shared EVM network (see GatewayFilters). */
export const FILTER_METHODS: ReadonlySet<string> = new Set([
  "eth_newFilter",
  "eth_newBlockFilter",
  "eth_newPendingTransactionFilter",
  "eth_getFilterChanges",
  "eth_getFilterLogs",
  "eth_uninstallFilter",
]);

const NOT_FOUND: CallResult = Object.freeze({ ok: false, error: GatewayError.FilterNotFound });
const STORE_DOWN: CallResult = Object.freeze({ ok: false, error: GatewayError.FilterStoreUnavailable });
const TOO_LARGE: CallResult = Object.freeze({ ok: false, error: GatewayError.FilterTooLarge });
/**
 * Largest filter object kept (JSON characters): a filter lives in Redis up to FILTER_TTL_MS after each poll,
 * MAX_FILTERS_PER_APP of them per app, so one app cannot park request-sized objects there.
 */
export const MAX_FILTER_CRITERIA_BYTES = 16 * 1024;
const EMPTY: CallResult = Object.freeze({ ok: true, reply: resultReply("[]") });

export function resultReply(json: string): Reply {
  return { tail: `,"result":${json}}`, kind: ReplyKind.Result, category: ErrorCategory.Success };
}

/** A reply's `result` value, parsed (undefined for an error or a reply that is not JSON). */
export function replyValue(reply: Reply): unknown {
  if (reply.kind !== ReplyKind.Result) return undefined;
  try {
    return (JSON.parse(`{${reply.tail.slice(1)}`) as { result?: unknown }).result;
  } catch {
    return undefined;
  }
}

const HEX_QUANTITY = /^0x[0-9a-fA-F]{1,13}$/;

/** A filter bound as a block number: a quantity or `earliest`; undefined = open (`latest`, `pending`, absent). */
function bound(v: unknown): number | undefined {
  if (typeof v !== "string") return undefined;
  if (v === "earliest") return 0;
  return HEX_QUANTITY.test(v) ? Number.parseInt(v, 16) : undefined;
}

const hex = (n: number) => `0x${n.toString(16)}`;

/**
 * Filters kept by the gateway instead of a node, so that a poll answers the same whichever node and
 * whichever data-plane instance or thread it lands on, and survives a node going away. State is in Redis
 * (FilterStore); the answers are built from the pool's head and ordinary calls:
 * - block filter: the hashes of blocks last+1 .. head (eth_getBlockByNumber on a node at or above that
 *   head), at most FILTER_MAX_BLOCKS_PER_POLL per poll, the oldest first (the next poll goes on from there);
 * - log filter: eth_getLogs over last+1 .. head within the filter's own fromBlock / toBlock, at most the
 *   network's maxLogsBlockRange blocks per poll (the next poll goes on from there);
 * - pending-transaction filter: a node's own filter (a node's transaction pool is its own), bound to the
 *   node that created it, the binding in Redis; a poll after that node left the pool or stopped being
 *   healthy, or that the node no longer knows, is `filter not found`, so that clients re-create it.
 * The head is the pool's health-checked network head (NetworkPool.bestHead): some node has every block a
 * poll reports. A poll's range is claimed in Redis before it is fetched (FilterStore.advance, a
 * compare-and-set) and given back when the fetch fails, so a block or log is reported once. Reorgs are not
 * replayed: a log filter reports the logs of the blocks canonical when it was polled (no `removed: true`).
 */
export class GatewayFilters {
  constructor(
    private readonly store: FilterStore,
    private readonly limitRow: ErrorRow,
    private readonly maxBlocksPerPoll: number,
  ) {}

  /** Answers one filter call for `tenant` on `pool`. Never throws. */
  async answer(pool: NetworkPool, tenant: string, call: RpcCall): Promise<CallResult> {
    try {
      return await this.dispatch(pool, tenant, call);
    } catch {
      // Redis failed (a fetch never throws: the pool answers failures as results).
      return STORE_DOWN;
    }
  }

  private dispatch(pool: NetworkPool, tenant: string, call: RpcCall): Promise<CallResult> {
    const params = call.params;
    switch (call.method) {
      case "eth_newBlockFilter":
        return this.install(pool, tenant, FilterKind.Blocks, undefined);
      case "eth_newFilter": {
        // Positional, or by name as jsonrpsee-based nodes take it (`{"filter": {...}}`).
        const f = Array.isArray(params)
          ? params[0]
          : params !== null && typeof params === "object"
            ? (params as { filter?: unknown }).filter
            : undefined;
        // Not a filter object: the node's own answer to it (its invalid-params error).
        if (f === null || typeof f !== "object" || Array.isArray(f)) return pool.call(call);
        const criteria = JSON.stringify(f);
        if (criteria.length > MAX_FILTER_CRITERIA_BYTES) return Promise.resolve(TOO_LARGE);
        return this.install(pool, tenant, FilterKind.Logs, criteria);
      }
      case "eth_newPendingTransactionFilter":
        return this.installPending(pool, tenant);
    }
    const id = Array.isArray(params) ? params[0] : undefined;
    if (typeof id !== "string") return Promise.resolve(NOT_FOUND);
    switch (call.method) {
      case "eth_getFilterChanges":
        return this.changes(pool, tenant, id);
      case "eth_getFilterLogs":
        return this.logs(pool, tenant, id);
      default:
        return this.uninstall(pool, tenant, id);
    }
  }

  private async install(
    pool: NetworkPool,
    tenant: string,
    kind: FilterKind,
    criteria: string | undefined,
  ): Promise<CallResult> {
    const head = await this.head(pool);
    if (typeof head !== "number") return head;
    const id = await this.store.add(tenant, { kind, last: head, criteria });
    return id === undefined ? { ok: false, error: this.limitRow } : created(id);
  }

  private async installPending(pool: NetworkPool, tenant: string): Promise<CallResult> {
    const u = pool.select(undefined);
    if (u === undefined) return { ok: false, error: GatewayError.NoUpstream };
    const r = await pool.callOn(u, { method: "eth_newPendingTransactionFilter", params: [] });
    if (!r.ok) return r;
    const remoteId = replyValue(r.reply);
    if (typeof remoteId !== "string") return r; // the node's error (or an answer that is no id) as it is
    const id = await this.store.add(tenant, {
      kind: FilterKind.Pending,
      last: 0,
      upstreamId: u.id,
      remoteId,
    });
    if (id !== undefined) return created(id);
    void pool.callOn(u, { method: "eth_uninstallFilter", params: [remoteId] });
    return { ok: false, error: this.limitRow };
  }

  /** The network head to report up to: the health-checked one, else asked of a node (before the first health round). */
  private async head(pool: NetworkPool): Promise<number | CallResult> {
    const best = pool.bestHead();
    if (best >= 0) return best;
    const r = await pool.call({ method: "eth_blockNumber", params: [] });
    if (!r.ok) return r;
    const n = bound(replyValue(r.reply));
    return n === undefined ? { ok: false, error: GatewayError.UpstreamBadResponse } : n;
  }

  private async changes(pool: NetworkPool, tenant: string, id: string): Promise<CallResult> {
    const f = await this.store.get(tenant, id);
    if (f === undefined) return NOT_FOUND;
    if (f.kind === FilterKind.Pending) return this.pendingChanges(pool, tenant, id, f);
    const head = await this.head(pool);
    if (typeof head !== "number") return head;
    const last = f.last;
    // Nothing new (or the head went back): the poll still keeps the filter alive.
    if (head <= last)
      return (await this.store.advance(tenant, id, last, last)) === Advance.Gone ? NOT_FOUND : EMPTY;
    const span = f.kind === FilterKind.Blocks ? this.maxBlocksPerPoll : maxLogsBlockRange(pool.record);
    const to = span > 0 ? Math.min(head, last + span) : head;
    const claimed = await this.store.advance(tenant, id, last, to);
    if (claimed === Advance.Gone) return NOT_FOUND;
    // Another poll of this filter took this range at the same moment: it reports these blocks.
    if (claimed === Advance.Lost) return EMPTY;
    const r =
      f.kind === FilterKind.Blocks
        ? await this.blockHashes(pool, last + 1, to)
        : await this.newLogs(pool, f, last + 1, to);
    // Not fetched: the range goes back to the filter, for the next poll.
    if (r === undefined || !r.ok || r.reply.kind === ReplyKind.Error) {
      await this.store.advance(tenant, id, to, last);
      return r ?? EMPTY;
    }
    return r;
  }

  /**
   * Hashes of blocks `from`..`to` in order, from one node whose head is at or above `to`; undefined when a
   * block is not there (a node behind the head it reported): the next poll asks again.
   */
  private async blockHashes(pool: NetworkPool, from: number, to: number): Promise<CallResult | undefined> {
    return onNodeAt(pool, to, async (send) => {
      const calls: Promise<CallResult>[] = [];
      for (let n = from; n <= to; n++)
        calls.push(send({ method: "eth_getBlockByNumber", params: [hex(n), false] }));
      const hashes: string[] = [];
      for (const r of await Promise.all(calls)) {
        if (!r.ok || r.reply.kind === ReplyKind.Error) return r;
        const hash = (replyValue(r.reply) as { hash?: unknown } | undefined)?.hash;
        if (typeof hash !== "string") return undefined;
        hashes.push(hash);
      }
      return { ok: true, reply: resultReply(JSON.stringify(hashes)) };
    });
  }

  /** The filter's logs in blocks `from`..`to` (within its own fromBlock / toBlock), from a node at or above `to`. */
  private async newLogs(pool: NetworkPool, f: FilterRecord, from: number, to: number): Promise<CallResult> {
    const criteria = JSON.parse(f.criteria ?? "{}") as Record<string, unknown>;
    const lo = Math.max(from, bound(criteria.fromBlock) ?? 0);
    const hi = Math.min(to, bound(criteria.toBlock) ?? to);
    if (lo > hi) return EMPTY;
    const query: Record<string, unknown> = { fromBlock: hex(lo), toBlock: hex(hi) };
    if (criteria.address !== undefined) query.address = criteria.address;
    if (criteria.topics !== undefined) query.topics = criteria.topics;
    const c = { method: "eth_getLogs", params: [query] };
    const r = (await onNodeAt(pool, hi, (send) => send(c)))!;
    return r.ok && r.reply.kind === ReplyKind.NullResult ? EMPTY : r;
  }

  /** eth_getFilterLogs: every log the filter matches now (its criteria as an eth_getLogs; no poll state). */
  private async logs(pool: NetworkPool, tenant: string, id: string): Promise<CallResult> {
    const f = await this.store.get(tenant, id);
    if (f === undefined || f.kind !== FilterKind.Logs) return NOT_FOUND;
    return pool.call({ method: "eth_getLogs", params: [JSON.parse(f.criteria ?? "{}")] });
  }

  private async pendingChanges(
    pool: NetworkPool,
    tenant: string,
    id: string,
    f: FilterRecord,
  ): Promise<CallResult> {
    const u = f.upstreamId === undefined ? undefined : pool.upstreamById(f.upstreamId);
    if (u === undefined || !pool.selectableAt(-1).includes(u)) {
      // The node holding it is gone or unhealthy: the client must create a new one (on another node).
      await this.store.remove(tenant, id);
      return NOT_FOUND;
    }
    if ((await this.store.advance(tenant, id, 0, 0)) === Advance.Gone) return NOT_FOUND;
    const r = await pool.callOn(u, { method: "eth_getFilterChanges", params: [f.remoteId] });
    if (r.ok && r.reply.kind === ReplyKind.Error && r.reply.tail.includes("filter not found")) {
      // The node restarted or expired it: it is gone here too.
      await this.store.remove(tenant, id);
      return NOT_FOUND;
    }
    return r;
  }

  private async uninstall(pool: NetworkPool, tenant: string, id: string): Promise<CallResult> {
    const f = await this.store.get(tenant, id);
    const removed = await this.store.remove(tenant, id);
    if (f?.kind === FilterKind.Pending && f.upstreamId !== undefined) {
      const u = pool.upstreamById(f.upstreamId);
      if (u !== undefined) void pool.callOn(u, { method: "eth_uninstallFilter", params: [f.remoteId] });
    }
    // geth: true when a filter was removed, false for an unknown id (no error).
    return { ok: true, reply: resultReply(removed ? "true" : "false") };
  }
}

/**
 * Runs `fetch` against one healthy node whose health-checked head is at or above `height` (each poll the
 * next of them in turn, so polls spread over the nodes), on the next such node when the exchange itself
 * failed (the node is down or timed out, not a node's answer); through the pool's own routing when none is
 * known to be there yet.
 */
let rotation = 0;

async function onNodeAt(
  pool: NetworkPool,
  height: number,
  fetch: (send: (c: OutgoingCall) => Promise<CallResult>) => Promise<CallResult | undefined>,
): Promise<CallResult | undefined> {
  const at = pool.selectableAt(height);
  if (at.length === 0) return fetch((c) => pool.call(c));
  const start = rotation++ % at.length;
  if (rotation > 0x3fffffff) rotation = 0;
  let out: CallResult | undefined;
  for (let i = 0; i < at.length; i++) {
    const u = at[(start + i) % at.length]!;
    out = await fetch((c) => pool.callOn(u, c));
    if (out === undefined || out.ok) return out;
  }
  return out;
}

function created(id: string): CallResult {
  return { ok: true, reply: resultReply(JSON.stringify(id)) };
}
