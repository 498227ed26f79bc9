import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { NetworkRecord, NodeRecord } from "../../../shared/src/redis/records";
import type { KeyVerifier, VerifiedKey } from "../auth/key-verifier";
import { SharedNodeMethodPolicy } from "../policy/method-policy";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import { errorJson } from "../server/respond";
import type { NodeLookup } from "./node-directory";

/** A dedicated node that is not running or not synced (yet). */
export const NodeUnavailable: ErrorRow = Object.freeze({
  httpStatus: 503,
  code: -32603,
  category: ErrorCategory.NodeError,
  reason: "node_unavailable",
  message: "Dedicated node is not available",
});

/**
 * Seam for the per-key rate limit of node endpoints (the rate-limit engineer plugs the data plane's
 * RateLimiter in here; structurally the same `check`). Limit = the workspace plan's requestsPerSecond.
 */
export interface NodeRateLimit {
  check(
    identifier: string,
    cost: number,
    limitPerSecond: number,
  ): { allowed: boolean; retryAfterMs: number; limit: number };
}

/** Node statuses in which the endpoint forwards. */
const SERVING = new Set(["SYNCED"]);

/** Methods refused by a node whose rpc-methods is Safe (what a real node refuses, plus account methods). */
const safePolicy = new SharedNodeMethodPolicy();
const ANY_NETWORK = { allowDebug: true } as NetworkRecord;

export function safeModeBlocked(method: string): string | undefined {
  return safePolicy.check(method, ANY_NETWORK) === undefined
    ? undefined
    : `${method} is not available: this dedicated node's rpc-methods is Safe; switch it to Unsafe to call it`;
}

export type NodeAuthResult =
  | { ok: true; key: VerifiedKey; node: NodeRecord }
  | { ok: false; error: ErrorRow; retryAfterMs?: number; limit?: number };

/** What a transport needs to answer: status + body ("" = no body, 204). */
export interface NodeReply {
  status: number;
  body: string;
  retryAfterMs?: number;
}

export interface NodeGatewayOptions {
  verifier: KeyVerifier;
  nodes: NodeLookup;
  logger: Logger;
  timeoutMs: number;
  rateLimit?: NodeRateLimit;
}

/**
 * The `/nodes/{nodeId}/{KEY}` endpoint's logic, transport-free so HTTP and WebSocket share it:
 * `authorize` once (HTTP: per request; WS: at upgrade), then `handle` each JSON-RPC text.
 */
export class NodeGateway {
  constructor(private readonly opts: NodeGatewayOptions) {}

  /** Only the node's own key opens its endpoint (an app key, or another node's key, is 401). */
  async authorize(nodeId: string, apiKey: string): Promise<NodeAuthResult> {
    if (apiKey === "") return { ok: false, error: GatewayError.MissingKey };
    let v = this.opts.verifier.verify(apiKey, Date.now());
    if (v instanceof Promise) v = await v;
    if (!v.ok) return { ok: false, error: v.error };
    if (v.key.record.kind !== "node" || v.key.record.nodeId !== nodeId) {
      return { ok: false, error: GatewayError.UnknownKey };
    }
    let node: NodeRecord | null;
    try {
      const n = this.opts.nodes.get(nodeId);
      node = n instanceof Promise ? await n : n;
    } catch {
      return { ok: false, error: GatewayError.Internal };
    }
    if (node === null) return { ok: false, error: NodeUnavailable };
    return { ok: true, key: v.key, node };
  }

  /** Current node record (status changes while a WS connection is open). */
  async current(nodeId: string): Promise<NodeRecord | null> {
    const n = this.opts.nodes.get(nodeId);
    return n instanceof Promise ? n : n;
  }

  /** Answers one JSON-RPC text (single or batch) for an authorized caller. */
  async handle(
    auth: { key: VerifiedKey; node: NodeRecord },
    text: string,
    requestId: string,
  ): Promise<NodeReply> {
    const node = (await this.current(auth.node.nodeId).catch(() => auth.node)) ?? auth.node;
    const parsed = parseRpcBody(text);
    if (!parsed.ok) return fail(parsed.error, parsed.idText, requestId, parsed.limit);
    const cost = parsed.batch ? parsed.items.length : 1;
    const rl = this.opts.rateLimit?.check(
      `node:${auth.key.hash}`,
      cost,
      auth.key.record.plan.requestsPerSecond,
    );
    if (rl !== undefined && !rl.allowed) {
      return {
        status: 429,
        body: errorJson(GatewayError.RateLimited, "null", { requestId, limit: rl.limit }),
        retryAfterMs: rl.retryAfterMs,
      };
    }
    if (!SERVING.has(node.status) || node.httpUrl === null) {
      const idText = parsed.batch ? "null" : (parsed.call.idText ?? "null");
      return fail(
        NodeUnavailable,
        idText,
        requestId,
        undefined,
        `Dedicated node is ${node.status.toLowerCase()}`,
      );
    }
    const safe = auth.key.record.rpcMethods !== "UNSAFE";
    const items: BatchItem[] = parsed.batch ? parsed.items : [parsed.call];
    const out = new Array<string | undefined>(items.length);
    const forwardIdx: number[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (isItemError(item)) {
        out[i] = errorJson(item.error, item.idText, { requestId });
        continue;
      }
      const blocked = safe ? safeModeBlocked(item.method) : undefined;
      if (blocked !== undefined) {
        if (item.idText !== undefined) {
          out[i] = errorJson(GatewayError.MethodBlocked, item.idText, { requestId, message: blocked });
        }
        continue;
      }
      forwardIdx.push(i);
    }
    if (forwardIdx.length > 0) {
      const calls = forwardIdx.map((i) => items[i] as RpcCall);
      const res = await this.forward(node, calls);
      if (!res.ok) {
        if (!parsed.batch || forwardIdx.length === items.length) {
          const idText = parsed.batch ? "null" : (parsed.call.idText ?? "null");
          return fail(res.error, idText, requestId);
        }
        for (const i of forwardIdx) {
          const idText = (items[i] as RpcCall).idText;
          if (idText !== undefined) out[i] = errorJson(res.error, idText, { requestId });
        }
      } else {
        for (let j = 0; j < forwardIdx.length; j++) {
          const i = forwardIdx[j]!;
          const call = items[i] as RpcCall;
          const reply = res.replies.get(j);
          if (call.method === "author_rotateKeys" && typeof reply?.result === "string") {
            void this.opts.nodes
              .recordSessionKeys(node.nodeId, reply.result)
              .catch((err) => this.opts.logger.warn({ err }, "could not record session keys"));
          }
          if (call.idText === undefined) continue;
          if (reply === undefined) {
            out[i] = errorJson(GatewayError.UpstreamBadResponse, call.idText, { requestId });
          } else if (reply.error !== undefined) {
            out[i] = `{"jsonrpc":"2.0","id":${call.idText},"error":${JSON.stringify(reply.error)}}`;
          } else {
            out[i] = `{"jsonrpc":"2.0","id":${call.idText},"result":${JSON.stringify(reply.result ?? null)}}`;
          }
        }
      }
    }
    if (!parsed.batch)
      return out[0] === undefined ? { status: 204, body: "" } : { status: 200, body: out[0] };
    const parts = out.filter((s): s is string => s !== undefined);
    return parts.length === 0 ? { status: 204, body: "" } : { status: 200, body: `[${parts.join(",")}]` };
  }

  /** Forwards calls to the node as one batch with positional ids; replies by position. */
  private async forward(
    node: NodeRecord,
    calls: RpcCall[],
  ): Promise<
    { ok: true; replies: Map<number, { result?: unknown; error?: unknown }> } | { ok: false; error: ErrorRow }
  > {
    const body = JSON.stringify(
      calls.map((c, j) => ({
        jsonrpc: "2.0",
        id: j,
        method: c.method,
        ...(c.params === undefined ? {} : { params: c.params }),
      })),
    );
    let text: string;
    try {
      const res = await fetch(node.httpUrl!, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const e = err as Error;
      return {
        ok: false,
        error: e.name === "TimeoutError" ? GatewayError.UpstreamTimeout : GatewayError.UpstreamUnreachable,
      };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return { ok: false, error: GatewayError.UpstreamBadResponse };
    }
    const replies = new Map<number, { result?: unknown; error?: unknown }>();
    const list = Array.isArray(parsed) ? parsed : [parsed];
    for (const r of list) {
      if (r === null || typeof r !== "object") continue;
      const o = r as { id?: unknown; result?: unknown; error?: unknown };
      if (typeof o.id === "number") replies.set(o.id, { result: o.result, error: o.error });
    }
    if (replies.size === 0 && list.length === 1 && calls.length === 1) {
      // A node that answers a whole-request error with id null.
      const o = list[0] as { error?: unknown };
      if (o && typeof o === "object" && o.error !== undefined) replies.set(0, { error: o.error });
    }
    return { ok: true, replies };
  }
}

function fail(row: ErrorRow, idText: string, requestId: string, limit?: number, message?: string): NodeReply {
  return { status: row.httpStatus, body: errorJson(row, idText, { requestId, limit, message }) };
}
