import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { NodeRecord } from "../../../shared/src/redis/records";
import type { RequestLogRecord } from "../../../shared/src/requestlog/contract";
import { OTHER_METHOD } from "../../../shared/src/usage/contract";
import type { KeyVerifier, VerifiedKey } from "../auth/key-verifier";
import {
  elementRefusal,
  type ForwardDeps,
  forwardCall,
  forwardPlan,
  Outcome,
  planBatch,
  planBody,
  refusalJson,
  resultJson,
} from "../forward/forward";
import { type LimitsGate, nodeIdentifier } from "../limits/admission";
import type { Metrics } from "../metrics/metrics";
import { type MethodPolicy, reachMessage, reachRefusal, SafeModeMethodPolicy } from "../policy/method-policy";
import type { RateLimitResult } from "../ratelimit/rate-limiter";
import type { RequestLog } from "../requestlog/recorder";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import { errorJson } from "../server/respond";
import type { RequestTrace } from "../telemetry/tracing";
import type { PoolOptions } from "../upstream/network-pool";
import type { CallResult } from "../upstream/reply";
import type { UsageRecorder } from "../usage/recorder";

/** Where `handle` collects the request-log records of one text (allocated only when one is kept). */
interface LogSink {
  rows: RequestLogRecord[] | undefined;
}

import type { NodeLookup } from "./node-directory";
import { NodePools } from "./node-pools";

/** Node statuses in which the endpoint forwards. */
const SERVING = new Set(["SYNCED"]);

/** Methods refused by a node whose rpc-methods is Safe (what a real node refuses, plus account methods). */
const safePolicy = new SafeModeMethodPolicy();

export function safeModeBlocked(method: string): string | undefined {
  return safePolicy.refusal(method) === undefined
    ? undefined
    : `${method} is not available: this dedicated node's rpc-methods is Safe; switch it to Unsafe to call it`;
}

/** Refused in both modes: methods that reach past the node (a fork URL, a peer, a listener, host files). */
function reachBlocked(method: string, params: unknown): string | undefined {
  const why = reachRefusal(method, params);
  return why === undefined ? undefined : reachMessage(method, why);
}

/** A node key's Safe mode as the forwarding core's method policy. */
const SAFE_MODE: MethodPolicy = {
  check: (method, _network, params) => reachBlocked(method, params) ?? safeModeBlocked(method),
};
/** Unsafe: the node serves everything its owner asks of it that stays within the node. */
const UNSAFE_MODE: MethodPolicy = { check: (method, _network, params) => reachBlocked(method, params) };

export type NodeAuthResult =
  | { ok: true; key: VerifiedKey; node: NodeRecord }
  | { ok: false; error: ErrorRow; retryAfterMs?: number; limit?: number };

/** What a transport needs to answer: status + body ("" = no body, 204). */
export interface NodeReply {
  status: number;
  body: string | Uint8Array;
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
  /** The shared networks' pool options (connections, timeouts, byte caps, the shared buffer budget). */
  pool: PoolOptions & { healthCheckIntervalMs: number };
  metrics: Metrics;
  /** The forwarding core's cache, concurrency caps (per node key) and settings, shared with the networks. */
  forward: ForwardDeps;
  /**
   * Per-second limit (LimitsGate.admit: a node key is limited per node at its plan's requestsPerSecond,
   * with no daily quota); none when absent.
   */
  limits?: LimitsGate;
  /** Usage recording: one record per request object, network `node-{nodeId}` (see nodeUsageNetwork). */
  usage?: UsageRecorder;
  /** Request log (transport `node`): errors plus sampled successes, network `node-{nodeId}`. */
  requestLog?: RequestLog;
}

/**
 * The `/nodes/{nodeId}/{KEY}` endpoint's logic, transport-free so HTTP and WebSocket share it:
 * `authorize` once (HTTP: per request; WS: at upgrade), then `handle` each JSON-RPC text.
 */
export class NodeGateway {
  private readonly pools: NodePools;

  constructor(private readonly opts: NodeGatewayOptions) {
    this.pools = new NodePools(opts.pool, opts.metrics);
  }

  /** Only the node's own key opens its endpoint (an app key, or another node's key, is 401). */
  async authorize(
    nodeId: string,
    apiKey: string,
    /** The client's address bucket, asked only when the key must be read from Redis (throttle). */
    client?: () => string | undefined,
  ): Promise<NodeAuthResult> {
    if (apiKey === "") return { ok: false, error: GatewayError.MissingKey };
    let v = this.opts.verifier.verify(apiKey, Date.now(), client);
    if (v instanceof Promise) v = await v;
    if (!v.ok) return { ok: false, error: v.error, retryAfterMs: v.retryAfterMs };
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
    /** The client's address truncated for the request log (read only when a record is kept). */
    clientIp?: () => string | null,
    /** Over the node's WebSocket: records carry HTTP status 0 (no HTTP response per message). */
    overWs = false,
    /**
     * The request's span when sampled (data-plane/src/telemetry): gets the limits step and, through the
     * forwarding core, the cache and upstream spans. The transport ends it.
     */
    trace?: RequestTrace,
  ): Promise<NodeReply> {
    const sink: LogSink = { rows: undefined };
    const reply = await this.answer(auth, text, requestId, sink, trace);
    const rows = sink.rows;
    if (rows !== undefined) {
      const ip = clientIp?.() ?? null;
      for (const r of rows) {
        r.httpStatus = overWs ? 0 : reply.status;
        r.clientIp = ip;
        this.opts.requestLog!.record(r);
      }
    }
    return reply;
  }

  private async answer(
    auth: { key: VerifiedKey; node: NodeRecord },
    text: string,
    requestId: string,
    sink: LogSink,
    trace: RequestTrace | undefined,
  ): Promise<NodeReply> {
    const started = performance.now();
    const node = (await this.current(auth.node.nodeId).catch(() => auth.node)) ?? auth.node;
    const usage = (methods: readonly string[], category: (i: number) => string) => {
      const u = this.opts.usage;
      const log = this.opts.requestLog;
      const latencyMs = performance.now() - started;
      const network = nodeUsageNetwork(auth.node.nodeId);
      if (log !== undefined) {
        // As on the app endpoints: one draw per request for its successes (server/exchange.ts usage).
        let successes: boolean | undefined;
        for (let i = 0; i < methods.length; i++) {
          const cat = category(i);
          if (cat === ErrorCategory.Success) {
            successes ??= log.wants(cat);
            if (!successes) continue;
          } else if (!log.wants(cat)) continue;
          if (sink.rows === undefined) sink.rows = [];
          sink.rows.push({
            time: Date.now(),
            workspaceId: auth.key.record.workspaceId,
            appId: null,
            network,
            transport: "node",
            method: methods[i]!,
            httpStatus: 0,
            category: cat,
            reason: "",
            latencyMs: Math.round(latencyMs * 1000) / 1000,
            requestId,
            item: i,
            clientIp: null,
          });
        }
      }
      if (u === undefined) return;
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
    const t0 = trace === undefined ? 0 : performance.now();
    const admission = this.opts.limits?.admit(auth.key, undefined, items.length);
    if (trace !== undefined) {
      trace.step("limits.admit", t0, {
        "gateway.limits.admitted": admission === undefined || admission.ok,
        "gateway.request_objects": items.length,
      });
      trace.set(parsed.batch ? { "gateway.batch.size": items.length } : { "rpc.method": parsed.call.method });
    }
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
      // A stopped or deleted node's connections are not kept (a new client is made when it serves again).
      this.pools.forget(node.nodeId);
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
    const pool = this.pools.get(node);
    if (pool === undefined) {
      // A URL the pool cannot use (the node record is the worker's): as a node that cannot be reached.
      usage(methods, () => GatewayError.UpstreamUnreachable.category);
      return { ...fail(GatewayError.UpstreamUnreachable, wholeId, requestId), rate };
    }
    const policy = auth.key.record.rpcMethods !== "UNSAFE" ? SAFE_MODE : UNSAFE_MODE;
    const flight = nodeIdentifier(auth.key);
    const deps = this.opts.forward;
    if (!parsed.batch) {
      const call = parsed.call;
      let out = forwardCall(deps, pool, policy, flight, call, undefined, trace);
      if (out instanceof Promise) out = await out;
      const idText = call.idText;
      switch (out.kind) {
        case Outcome.Refused: {
          const row = out.refusal.row;
          usage(methods, () => row.category);
          if (idText === undefined) return { status: 204, body: "", rate };
          return { status: row.httpStatus, body: refusalJson(out.refusal, idText, requestId), rate };
        }
        case Outcome.OverCap: {
          const r = out.refusal;
          usage(methods, () => r.row.category);
          return {
            status: 429,
            body: errorJson(r.row, wholeId, { requestId, ...r }),
            retryAfterSeconds: r.retryAfterMs / 1000,
            rate,
          };
        }
        default: {
          const result: CallResult =
            out.kind === Outcome.Cached ? { ok: true, reply: out.reply } : out.result;
          if (!result.ok) {
            usage(methods, () => result.error.category);
            return { ...fail(result.error, wholeId, requestId), rate };
          }
          usage(methods, () => result.reply.category);
          this.afterCall(node, call, result);
          if (idText === undefined) return { status: 204, body: "", rate };
          return { status: 200, body: resultJson(idText, result, requestId)!, rate };
        }
      }
    }
    const plan = planBatch(items, requestId, (c) => elementRefusal(c, pool, policy));
    const cats = plan.categories;
    // Sent as the client's text unless an answer must be read here (author_rotateKeys: afterCall).
    const verbatim =
      parsed.batch && parsed.verbatim && plan.forward.every((c) => c.method !== "author_rotateKeys")
        ? text
        : undefined;
    const done = await forwardPlan(deps, pool, flight, plan, requestId, verbatim, trace);
    if (done.overCap !== undefined) {
      const r = done.overCap;
      usage(methods, () => r.row.category);
      return {
        status: 429,
        body: errorJson(r.row, "null", { requestId, ...r }),
        retryAfterSeconds: r.retryAfterMs / 1000,
        rate,
      };
    }
    // The node failed as a whole and nothing else was answered: the whole request fails with its status.
    if (done.failure !== undefined && plan.forward.length === items.length) {
      usage(methods, (i) => cats[i]!);
      return { ...fail(done.failure, "null", requestId), rate };
    }
    for (let j = 0; j < done.results.length; j++) this.afterCall(node, plan.forward[j]!, done.results[j]!);
    usage(methods, (i) => cats[i]!);
    const body = planBody(plan);
    return body === "" ? { status: 204, body: "", rate } : { status: 200, body, rate };
  }

  /** What a node endpoint keeps from an answer: author_rotateKeys' session keys, for the console. */
  private afterCall(node: NodeRecord, call: RpcCall, r: CallResult): void {
    if (call.method === "author_rotateKeys" && r.ok) this.recordSessionKeys(node, r.reply.tail);
  }

  /** author_rotateKeys' answer (hex session keys) is kept on the node record, for the console. */
  private recordSessionKeys(node: NodeRecord, tail: string): void {
    let keys: unknown;
    try {
      keys = (JSON.parse(`{${tail.slice(1)}`) as { result?: unknown }).result;
    } catch {
      return;
    }
    if (typeof keys !== "string") return;
    void this.opts.nodes
      .recordSessionKeys(node.nodeId, keys)
      .catch((err) => this.opts.logger.warn({ err }, "could not record session keys"));
  }

  /** Closes the connections to every dedicated node (shutdown). */
  close(): Promise<void> {
    return this.pools.close();
  }
}

function fail(row: ErrorRow, idText: string, requestId: string, limit?: number, message?: string): NodeReply {
  return { status: row.httpStatus, body: errorJson(row, idText, { requestId, limit, message }) };
}
