import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { NodeRecord } from "../../../shared/src/redis/records";
import type { KeyVerifier, VerifiedKey } from "../auth/key-verifier";
import type { Metrics } from "../metrics/metrics";
import { nodeUsageNetwork } from "../pipeline/account";
import {
  authorizeNodeKey,
  type NodeAuthResult,
  type NodeEndpoint,
  nodeKeyPolicy,
  safeModeBlocked,
} from "../pipeline/authorize";
import {
  type EndpointStage,
  HeldRequest,
  type PipelineDeps,
  type PipelineRequest,
} from "../pipeline/request";
import type { RpcCall } from "../rpc/parse";
import type { RequestTrace } from "../telemetry/tracing";
import type { PoolOptions } from "../upstream/network-pool";
import type { CallResult } from "../upstream/reply";
import type { NodeLookup } from "./node-directory";
import { NodePools } from "./node-pools";

export type { NodeAuthResult };
export { nodeUsageNetwork, safeModeBlocked };

/** Node statuses in which the endpoint forwards. */
const SERVING = new Set(["SYNCED"]);

export interface NodeGatewayOptions {
  verifier: KeyVerifier;
  nodes: NodeLookup;
  logger: Logger;
  /** The shared networks' pool options (connections, timeouts, byte caps, the shared buffer budget). */
  pool: PoolOptions & { healthCheckIntervalMs: number };
  metrics: Metrics;
  /**
   * The pipeline's sinks and forwarding core (cache, concurrency caps per node key), shared with the
   * networks; without `poolCalls`: a dedicated node is one node, every call goes to it.
   */
  deps: PipelineDeps;
}

/**
 * The `/nodes/{nodeId}/{KEY}` endpoint's own part of the pipeline, whatever the transport: the node-key
 * authorizer, and the stage between admission and forwarding (the node's state, its pool, Safe mode,
 * author_rotateKeys' session keys). Parse, admission (a node key: per node per second, no quota), answers
 * and accounting (network `node-{nodeId}`, transport `node`) are the pipeline's (pipeline/request.ts).
 */
export class NodeGateway implements NodeEndpoint, EndpointStage {
  private readonly pools: NodePools;
  readonly stage: EndpointStage = this;
  readonly deps: PipelineDeps;

  constructor(private readonly opts: NodeGatewayOptions) {
    this.pools = new NodePools(opts.pool, opts.metrics);
    this.deps = opts.deps;
  }

  /** Only the node's own key opens its endpoint (an app key, or another node's key, is 401). */
  authorize(nodeId: string, apiKey: string, client?: () => string | undefined): Promise<NodeAuthResult> {
    return authorizeNodeKey(this.opts.verifier, this.opts.nodes, nodeId, apiKey, client);
  }

  /** Whether the node forwards now (SYNCED, with a URL). */
  serving(node: NodeRecord): boolean {
    return SERVING.has(node.status) && node.httpUrl !== null;
  }

  /**
   * After admission: the node's current record (its status changes while a WebSocket is open), then its
   * pool and the key's Safe / Unsafe policy; a node that does not serve answers the whole request.
   */
  prepare(req: PipelineRequest): boolean | Promise<boolean> {
    const nodeId = req.key!.record.nodeId ?? "";
    let n: NodeRecord | null | Promise<NodeRecord | null>;
    try {
      n = this.opts.nodes.get(nodeId);
    } catch {
      n = null;
    }
    if (n instanceof Promise)
      return n.then(
        (r) => this.ready(req, r),
        () => this.ready(req, null),
      );
    return this.ready(req, n);
  }

  private ready(req: PipelineRequest, node: NodeRecord | null): boolean {
    if (node === null || !this.serving(node)) {
      // A stopped or deleted node's connections are not kept (a new client is made when it serves again).
      if (node !== null) this.pools.forget(node.nodeId);
      const status = node === null ? "deleted" : node.status.toLowerCase();
      req.fail(GatewayError.NodeUnavailable, req.idText, undefined, true, `Dedicated node is ${status}`);
      return false;
    }
    const pool = this.pools.get(node);
    if (pool === undefined) {
      // A URL the pool cannot use (the node record is the worker's): as a node that cannot be reached.
      req.fail(GatewayError.UpstreamUnreachable, req.idText);
      return false;
    }
    req.pool = pool;
    req.policy = nodeKeyPolicy(req.key!);
    return true;
  }

  keepsAnswer(call: RpcCall): boolean {
    return call.method === "author_rotateKeys";
  }

  /** What a node endpoint keeps from an answer: author_rotateKeys' session keys, for the console. */
  afterCall(req: PipelineRequest, call: RpcCall, r: CallResult): void {
    if (call.method === "author_rotateKeys" && r.ok)
      this.recordSessionKeys(req.key!.record.nodeId ?? "", r.reply.tail);
  }

  /**
   * One WebSocket text message (single or batch) of an authorized session, through the pipeline; the
   * answer's text ("" = none) once settled. Its request-log records carry HTTP status 0.
   */
  async handle(
    key: VerifiedKey,
    nodeId: string,
    text: string,
    requestId: string,
    clientIp: () => string | null,
    trace?: RequestTrace,
  ): Promise<{ status: number; body: string | Uint8Array }> {
    const req = new HeldRequest(
      this.deps,
      "node",
      requestId,
      nodeUsageNetwork(nodeId),
      "",
      performance.now(),
      undefined,
      nodeKeyPolicy(key),
      "node",
    );
    req.key = key;
    req.trace = trace;
    req.stage = this;
    const p = req.run(text);
    if (p instanceof Promise) await p;
    if (req.hasLogRows) req.logged(0, clientIp());
    return { status: req.status, body: req.status === 204 ? "" : req.body };
  }

  /** author_rotateKeys' answer (hex session keys) is kept on the node record, for the console. */
  private recordSessionKeys(nodeId: string, tail: string): void {
    let keys: unknown;
    try {
      keys = (JSON.parse(`{${tail.slice(1)}`) as { result?: unknown }).result;
    } catch {
      return;
    }
    if (typeof keys !== "string") return;
    void this.opts.nodes
      .recordSessionKeys(nodeId, keys)
      .catch((err) => this.opts.logger.warn({ err }, "could not record session keys"));
  }

  /** Closes the connections to every dedicated node (shutdown). */
  close(): Promise<void> {
    return this.pools.close();
  }
}
