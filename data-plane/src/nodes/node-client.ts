import {
  categoryOfNodeError,
  ErrorCategory,
  type ErrorRow,
  GatewayError,
} from "../../../shared/src/jsonrpc/errors";
import type { NodeRecord } from "../../../shared/src/redis/records";
import type { BufferBudget } from "../upstream/buffer-budget";
import type { OutgoingCall } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { ExchangeKind, exchangeFailureRow, INVALID_REPLY, Upstream } from "../upstream/upstream";

export interface NodeClientOptions {
  timeoutMs: number;
  /** Keep-alive connections per dedicated node. */
  connections: number;
  /** Most bytes read from one node answer (UPSTREAM_MAX_RESPONSE_BYTES). */
  maxResponseBytes: number;
  /** The process-wide budget of bytes buffered from answers, shared with the network pools. */
  bufferBudget?: BufferBudget;
}

/** Added to UPSTREAM_TIMEOUT_MS before a replaced node client is closed. */
const RETIRE_MARGIN_MS = 1_000;

/** A whole exchange's outcome: one result per call (results[j] answers calls[j]), or why it failed. */
export type NodeBatchResult = { ok: true; results: CallResult[] } | { ok: false; error: ErrorRow };

/**
 * Dedicated nodes over the same upstream client as shared networks (undici `Upstream`: keep-alive pool,
 * response byte cap, timeouts, 429 / 413 handling), one per node, replaced when its URL changes.
 *
 * Unlike a shared network there is no selection, failover or breaker: a dedicated node is the only node
 * its owner can reach, so every call goes to it (the breaker state its Upstream keeps is never read).
 */
export class NodeClient {
  private readonly byNode = new Map<string, Upstream>();

  constructor(private readonly opts: NodeClientOptions) {}

  /**
   * Sends `calls` to the node as one JSON-RPC batch with positional ids (0..n-1) and splits the answer
   * back per call: a missing answer is upstream_bad_response for that call; a single error object with
   * no usable id, for a one-call batch, is that call's error.
   */
  async batch(node: NodeRecord, calls: readonly OutgoingCall[]): Promise<NodeBatchResult> {
    let upstream: Upstream;
    try {
      upstream = this.upstream(node);
    } catch {
      // A URL the client cannot use (the node record is the worker's): as a node that cannot be reached.
      return { ok: false, error: GatewayError.UpstreamUnreachable };
    }
    const parts = new Array<string>(calls.length);
    for (let j = 0; j < calls.length; j++) {
      const c = calls[j]!;
      parts[j] =
        c.params === undefined
          ? `{"jsonrpc":"2.0","id":${j},"method":${JSON.stringify(c.method)}}`
          : `{"jsonrpc":"2.0","id":${j},"method":${JSON.stringify(c.method)},"params":${JSON.stringify(c.params)}}`;
    }
    // Light: the kind only feeds breaker verdicts and the heavy-call share, which a node's client never reads.
    const r = await upstream.exchange(`[${parts.join(",")}]`, ExchangeKind.Light, (text) =>
      splitReplies(text, calls.length),
    );
    if (r.ok) return { ok: true, results: r.value };
    return { ok: false, error: exchangeFailureRow(r.failure, upstream) };
  }

  /** Closes one node's connections, if any (the node stopped serving). */
  forget(nodeId: string): void {
    const u = this.byNode.get(nodeId);
    if (u === undefined) return;
    this.byNode.delete(nodeId);
    this.retire(u);
  }

  /**
   * Closes a node client that is no longer used once its calls can have ended (UPSTREAM_TIMEOUT_MS and a
   * margin): closing at once would cut calls in flight to a node whose record just changed.
   */
  private retire(u: Upstream): void {
    if (u.inFlight === 0) {
      void u.close();
      return;
    }
    setTimeout(() => void u.close(), this.opts.timeoutMs + RETIRE_MARGIN_MS).unref();
  }

  /** Nodes with a client now. */
  get size(): number {
    return this.byNode.size;
  }

  /** Closes every node's connections (shutdown). */
  async close(): Promise<void> {
    const all = [...this.byNode.values()];
    this.byNode.clear();
    await Promise.all(all.map((u) => u.close()));
  }

  private upstream(node: NodeRecord): Upstream {
    const url = node.httpUrl!;
    const have = this.byNode.get(node.nodeId);
    if (have !== undefined && have.httpUrl === url) return have;
    if (have !== undefined) this.retire(have);
    const u = new Upstream(
      { id: `node-${node.nodeId}`, httpUrl: url, wsUrl: null, weight: 1 },
      {
        timeoutMs: this.opts.timeoutMs,
        connections: this.opts.connections,
        // Never read (see the class comment); a threshold the counts cannot reach.
        breakerThreshold: Number.MAX_SAFE_INTEGER,
        breakerCooldownMs: 0,
        maxResponseBytes: this.opts.maxResponseBytes,
        bufferBudget: this.opts.bufferBudget,
      },
    );
    this.byNode.set(node.nodeId, u);
    return u;
  }
}

/** A node's answer to a positional-id batch of `n` calls, per call; INVALID_REPLY when not JSON. */
function splitReplies(text: string, n: number): CallResult[] | typeof INVALID_REPLY {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return INVALID_REPLY;
  }
  const out = new Array<CallResult | undefined>(n);
  const list = Array.isArray(parsed) ? parsed : [parsed];
  let found = 0;
  for (const el of list) {
    if (el === null || typeof el !== "object") continue;
    const o = el as { id?: unknown; result?: unknown; error?: unknown };
    if (typeof o.id !== "number" || o.id < 0 || o.id >= n || !Number.isInteger(o.id)) continue;
    if (out[o.id] === undefined) found++;
    out[o.id] = { ok: true, reply: nodeReply(o) };
  }
  if (found === 0 && list.length === 1 && n === 1) {
    // A node that answers a whole-request error with id null.
    const o = list[0] as { error?: unknown } | null;
    if (o !== null && typeof o === "object" && o.error !== undefined) {
      out[0] = { ok: true, reply: nodeReply({ error: o.error }) };
    }
  }
  for (let j = 0; j < n; j++) {
    if (out[j] === undefined) out[j] = { ok: false, error: GatewayError.UpstreamBadResponse };
  }
  return out as CallResult[];
}

/** One answer object as a Reply: the node's error passed through as it sent it, else its result (absent = null). */
function nodeReply(o: { result?: unknown; error?: unknown }): Reply {
  if (o.error !== undefined) {
    const code = (o.error as { code?: unknown } | null)?.code;
    return {
      tail: `,"error":${JSON.stringify(o.error)}}`,
      kind: ReplyKind.Error,
      category: typeof code === "number" ? categoryOfNodeError(code) : ErrorCategory.NodeError,
    };
  }
  const result = o.result ?? null;
  return {
    tail: `,"result":${JSON.stringify(result)}}`,
    kind: result === null ? ReplyKind.NullResult : ReplyKind.Result,
    category: ErrorCategory.Success,
  };
}
