import {
  categoryOfNodeError,
  ErrorCategory,
  type ErrorRow,
  GatewayError,
  responseTooLargeRow,
} from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { NodeRecord } from "../../../shared/src/redis/records";
import { OTHER_METHOD } from "../../../shared/src/usage/contract";
import type { KeyVerifier, VerifiedKey } from "../auth/key-verifier";
import type { LimitsGate } from "../limits/admission";
import { SafeModeMethodPolicy } from "../policy/method-policy";
import type { RateLimitResult } from "../ratelimit/rate-limiter";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import { errorJson } from "../server/respond";
import { type BufferBudget, defaultBufferBudget } from "../upstream/buffer-budget";
import type { UsageRecorder } from "../usage/recorder";
import type { NodeLookup } from "./node-directory";

/** Node statuses in which the endpoint forwards. */
const SERVING = new Set(["SYNCED"]);

/** Methods refused by a node whose rpc-methods is Safe (what a real node refuses, plus account methods). */
const safePolicy = new SafeModeMethodPolicy();

export function safeModeBlocked(method: string): string | undefined {
  return safePolicy.refusal(method) === undefined
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
  /** 429: the `Retry-After` header (whole seconds). */
  retryAfterSeconds?: number;
  /** The per-second decision, for `X-RateLimit-Limit` / `X-RateLimit-Remaining`. */
  rate?: RateLimitResult;
}

/** The usage network name of a dedicated node's traffic (a usage network name: no ':' allowed). */
export function nodeUsageNetwork(nodeId: string): string {
  return `node-${nodeId.toLowerCase()}`;
}

export interface NodeGatewayOptions {
  verifier: KeyVerifier;
  nodes: NodeLookup;
  logger: Logger;
  timeoutMs: number;
  /** Most bytes read from one node answer (UPSTREAM_MAX_RESPONSE_BYTES); default 32 MiB. */
  maxResponseBytes?: number;
  /** Process-wide budget of buffered answer bytes, shared with the pools (UPSTREAM_BUFFER_BUDGET_BYTES). */
  bufferBudget?: BufferBudget;
  /**
   * Per-second limit (LimitsGate.admit: a node key is limited per node at its plan's requestsPerSecond,
   * with no daily quota); none when absent.
   */
  limits?: LimitsGate;
  /** Usage recording: one record per request object, network `node-{nodeId}` (see nodeUsageNetwork). */
  usage?: UsageRecorder;
}

/**
 * The `/nodes/{nodeId}/{KEY}` endpoint's logic, transport-free so HTTP and WebSocket share it:
 * `authorize` once (HTTP: per request; WS: at upgrade), then `handle` each JSON-RPC text.
 */
export class NodeGateway {
  private readonly maxResponseBytes: number;
  private readonly tooLargeRow: ErrorRow;
  private readonly budget: BufferBudget;

  constructor(private readonly opts: NodeGatewayOptions) {
    this.maxResponseBytes = opts.maxResponseBytes ?? 32 * 1024 * 1024;
    this.budget = opts.bufferBudget ?? defaultBufferBudget;
    this.tooLargeRow = responseTooLargeRow(this.maxResponseBytes);
  }

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
    if (node === null) return { ok: false, error: GatewayError.NodeUnavailable };
    return { ok: true, key: v.key, node };
  }

  /** Current node record (status changes while a WS connection is open). */
  async current(nodeId: string): Promise<NodeRecord | null> {
    const n = this.opts.nodes.get(nodeId);
    return n instanceof Promise ? n : n;
  }

  /** Whether the node forwards now (SYNCED, with a URL). */
  serving(node: NodeRecord): boolean {
    return SERVING.has(node.status) && node.httpUrl !== null;
  }

  /**
   * Answers one JSON-RPC text (single or batch) for an authorized caller: the per-second limit (once per
   * text with its number of request objects; a refusal answers the whole text), node state, Safe mode per
   * element, then forwarding. Every request object is recorded as usage under `node-{nodeId}`.
   */
  async handle(
    auth: { key: VerifiedKey; node: NodeRecord },
    text: string,
    requestId: string,
  ): Promise<NodeReply> {
    const started = performance.now();
    const node = (await this.current(auth.node.nodeId).catch(() => auth.node)) ?? auth.node;
    const usage = (methods: readonly string[], category: (i: number) => string) => {
      const u = this.opts.usage;
      if (u === undefined) return;
      const latencyMs = performance.now() - started;
      const network = nodeUsageNetwork(auth.node.nodeId);
      for (let i = 0; i < methods.length; i++) {
        u.record({
          workspaceId: auth.key.record.workspaceId,
          appId: null,
          network,
          method: methods[i]!,
          category: category(i) as ErrorCategory,
          latencyMs,
        });
      }
    };
    const parsed = parseRpcBody(text);
    if (!parsed.ok) {
      usage([OTHER_METHOD], () => parsed.error.category);
      return fail(parsed.error, parsed.idText, requestId, parsed.limit);
    }
    const items: BatchItem[] = parsed.batch ? parsed.items : [parsed.call];
    const methods = items.map((it) => (isItemError(it) ? OTHER_METHOD : it.method));
    const wholeId = parsed.batch ? "null" : (parsed.call.idText ?? "null");
    const admission = this.opts.limits?.admit(auth.key, undefined, items.length);
    if (admission !== undefined && !admission.ok) {
      usage(methods, () => admission.row.category);
      return {
        status: 429,
        body: errorJson(admission.row, wholeId, {
          requestId,
          retryAfterMs: admission.retryAfterMs,
          limit: admission.limit,
          message: admission.message,
        }),
        retryAfterSeconds: admission.retryAfterSeconds,
        rate: admission.rate,
      };
    }
    const rate = admission?.rate;
    if (!this.serving(node)) {
      usage(methods, () => GatewayError.NodeUnavailable.category);
      return {
        ...fail(
          GatewayError.NodeUnavailable,
          wholeId,
          requestId,
          undefined,
          `Dedicated node is ${node.status.toLowerCase()}`,
        ),
        rate,
      };
    }
    const safe = auth.key.record.rpcMethods !== "UNSAFE";
    const out = new Array<string | undefined>(items.length);
    const cats = new Array<string>(items.length).fill(ErrorCategory.Success);
    const forwardIdx: number[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (isItemError(item)) {
        out[i] = errorJson(item.error, item.idText, { requestId });
        cats[i] = item.error.category;
        continue;
      }
      const blocked = safe ? safeModeBlocked(item.method) : undefined;
      if (blocked !== undefined) {
        cats[i] = GatewayError.MethodBlocked.category;
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
        for (const i of forwardIdx) cats[i] = res.error.category;
        if (!parsed.batch || forwardIdx.length === items.length) {
          usage(methods, (i) => cats[i]!);
          return { ...fail(res.error, wholeId, requestId), rate };
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
          if (reply === undefined) {
            cats[i] = GatewayError.UpstreamBadResponse.category;
            if (call.idText !== undefined)
              out[i] = errorJson(GatewayError.UpstreamBadResponse, call.idText, { requestId });
          } else if (reply.error !== undefined) {
            const code = (reply.error as { code?: unknown } | null)?.code;
            cats[i] = typeof code === "number" ? categoryOfNodeError(code) : ErrorCategory.NodeError;
            if (call.idText !== undefined)
              out[i] = `{"jsonrpc":"2.0","id":${call.idText},"error":${JSON.stringify(reply.error)}}`;
          } else if (call.idText !== undefined) {
            out[i] = `{"jsonrpc":"2.0","id":${call.idText},"result":${JSON.stringify(reply.result ?? null)}}`;
          }
        }
      }
    }
    usage(methods, (i) => cats[i]!);
    if (!parsed.batch)
      return out[0] === undefined ? { status: 204, body: "", rate } : { status: 200, body: out[0], rate };
    const parts = out.filter((s): s is string => s !== undefined);
    return parts.length === 0
      ? { status: 204, body: "", rate }
      : { status: 200, body: `[${parts.join(",")}]`, rate };
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
      const answer = await readCapped(res, this.maxResponseBytes, this.budget);
      if (answer === TOO_LARGE) return { ok: false, error: this.tooLargeRow };
      if (answer === BUFFER_FULL) return { ok: false, error: GatewayError.UpstreamBufferFull };
      text = answer;
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

const TOO_LARGE = 0;
const BUFFER_FULL = 1;

/**
 * The body as text; TOO_LARGE once it crosses `max` bytes, BUFFER_FULL once a chunk does not fit in the
 * process-wide `budget`: then the stream is cancelled, which aborts the fetch and destroys its connection, so
 * nothing more is read or kept. Each chunk is taken from the budget as it arrives; all of it is given back
 * once, in `finally`, whichever way the read ends (a read error or timeout included).
 */
async function readCapped(
  res: Response,
  max: number,
  budget: BufferBudget,
): Promise<string | typeof TOO_LARGE | typeof BUFFER_FULL> {
  const declared = Number(res.headers.get("content-length") ?? 0);
  const body = res.body;
  if (declared > max || !budget.fits(declared)) {
    await body?.cancel().catch(() => undefined);
    return declared > max ? TOO_LARGE : BUFFER_FULL;
  }
  if (body === null) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const n = value.byteLength;
      if (total + n > max || !budget.take(n)) {
        chunks.length = 0;
        await reader.cancel().catch(() => undefined);
        return total + n > max ? TOO_LARGE : BUFFER_FULL;
      }
      total += n;
      chunks.push(value);
    }
    return Buffer.concat(chunks, total).toString("utf8");
  } finally {
    budget.release(total);
  }
}

function fail(row: ErrorRow, idText: string, requestId: string, limit?: number, message?: string): NodeReply {
  return { status: row.httpStatus, body: errorJson(row, idText, { requestId, limit, message }) };
}
