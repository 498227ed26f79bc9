import { type Job, Queue, UnrecoverableError, Worker } from "bullmq";
import type { DataSource } from "typeorm";
import type { QueryDeepPartialEntity } from "typeorm/query-builder/QueryPartialEntity";
import type { Logger } from "../../../shared/src/log/logger";
import {
  JobName,
  type JobPayloads,
  type NodeOpPayload,
  nodeJobId,
  QueueName,
} from "../../../shared/src/queue/names";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { NodeSessionKeysRecordSchema } from "../../../shared/src/redis/records";
import { decodeAccountIdVec, fromHex } from "../../../shared/src/substrate/scale";
import {
  parseAccountId,
  SESSION_VALIDATORS_KEY,
  sessionNextKeysKey,
  stakingValidatorsKey,
} from "../../../shared/src/substrate/storage-keys";
import { tracedProcessor } from "../../../shared/src/telemetry/jobs";
import type { PublicationService } from "../publication/publication.service";
import { emitNodeStatus, NOOP_WEBHOOK_EMITTER, type WebhookEmitter } from "../webhooks/webhook.emitter";
import { WebhookEventType } from "../webhooks/webhook.types";
import type { Protocol } from "./catalog";
import type { NodeConfig } from "./node.config";
import { DedicatedNode, type ProviderState } from "./node.entity";
import { recordEvent, specOf } from "./node.service";
import { DesiredState, NodeStatus, NodeType, ValidatorStatus } from "./node.types";
import type { NodeProvider } from "./providers/provider";

export const NODE_SYNC_SCHEDULER_ID = "node-sync-status-every";
export const NODE_VALIDATOR_SCHEDULER_ID = "node-validator-status-every";

async function rpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(5000),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

function hexToNumber(v: unknown): number {
  return typeof v === "string" ? Number.parseInt(v, 16) : Number(v);
}

/**
 * Converges dedicated nodes to their desired state (QueueName.Nodes). Per-node jobs carry the row's
 * generation: a job of an older generation is superseded and does nothing. Every status write is
 * conditional on the generation it was computed for, so a sweep never overwrites a newer operation.
 */
export class NodeOperations {
  constructor(
    private readonly ds: DataSource,
    private readonly provider: NodeProvider,
    private readonly publication: PublicationService,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly queue: Queue,
    private readonly cfg: NodeConfig,
    private readonly log: Logger,
    private readonly webhooks: WebhookEmitter = NOOP_WEBHOOK_EMITTER,
  ) {}

  private load(id: string): Promise<DedicatedNode | null> {
    return this.ds.getRepository(DedicatedNode).findOne({ where: { id }, relations: { network: true } });
  }

  /** Sets status (and optional fields) when the row is still at `generation`; records an event. */
  private async setStatus(
    node: DedicatedNode,
    status: NodeStatus,
    reason: string | null,
    event: { type: string; message: string } | null,
    extra: Partial<DedicatedNode> = {},
    onlyFrom?: NodeStatus[],
  ): Promise<boolean> {
    const changed = await this.ds.transaction(async (m) => {
      const qb = m
        .createQueryBuilder()
        .update(DedicatedNode)
        .set({ status, statusReason: reason, ...extra } as QueryDeepPartialEntity<DedicatedNode>)
        .where("id = :id AND generation = :gen", { id: node.id, gen: node.generation });
      if (onlyFrom) qb.andWhere("status IN (:...from)", { from: onlyFrom });
      const r = await qb.execute();
      if (!r.affected) return false;
      if (event) await recordEvent(m, node.id, event.type, event.message);
      return true;
    });
    if (changed) {
      const previous = node.status;
      node.status = status;
      await this.publication.safely("node status", () => this.publication.publishNodes([node.id]));
      await emitNodeStatus(this.webhooks, node, previous, status, reason);
    }
    return changed;
  }

  private persistFor(node: DedicatedNode) {
    return async (state: ProviderState) => {
      await this.ds.getRepository(DedicatedNode).update({ id: node.id, generation: node.generation }, {
        providerState: state,
      } as QueryDeepPartialEntity<DedicatedNode>);
    };
  }

  private current(node: DedicatedNode | null, data: NodeOpPayload): node is DedicatedNode {
    return node !== null && node.generation === data.generation;
  }

  async provisionOrRoll(job: Job<NodeOpPayload>, roll: boolean): Promise<string> {
    const node = await this.load(job.data.nodeId);
    if (!this.current(node, job.data)) return "superseded";
    if (node.desiredState !== DesiredState.RUNNING) return "not wanted running";
    const spec = specOf(node, node.network.protocol as Protocol);
    await this.setStatus(
      node,
      NodeStatus.PROVISIONING,
      roll ? "Restarting with the current launch args" : null,
      {
        type: "PROVISIONING",
        message: `${roll ? "Rolling" : "Provisioning"} on ${this.provider.name} (attempt ${job.attemptsMade + 1})`,
      },
    );
    const op = roll ? this.provider.roll.bind(this.provider) : this.provider.provision.bind(this.provider);
    const res = await op(spec, node.providerState, this.persistFor(node));
    const ok = await this.setStatus(
      node,
      NodeStatus.SYNCING,
      null,
      { type: "SYNCING", message: "Node is running; syncing" },
      {
        providerState: res.state,
        internalHttpUrl: res.endpoints.httpUrl,
        internalWsUrl: res.endpoints.wsUrl,
      },
    );
    return ok ? "syncing" : "superseded";
  }

  async stop(job: Job<NodeOpPayload>): Promise<string> {
    const node = await this.load(job.data.nodeId);
    if (!this.current(node, job.data)) return "superseded";
    const spec = specOf(node, node.network.protocol as Protocol);
    const state = await this.provider.stop(spec, node.providerState);
    await this.setStatus(
      node,
      NodeStatus.STOPPED,
      null,
      { type: "STOPPED", message: "Node stopped" },
      {
        providerState: state,
      },
    );
    return "stopped";
  }

  async delete(job: Job<NodeOpPayload>): Promise<string> {
    const node = await this.load(job.data.nodeId);
    if (!this.current(node, job.data)) return "superseded";
    const spec = specOf(node, node.network.protocol as Protocol);
    await this.provider.delete(spec, node.providerState);
    await this.setStatus(
      node,
      NodeStatus.DELETED,
      null,
      { type: "DELETED", message: "Node and its data removed" },
      {
        providerState: {},
        internalHttpUrl: null,
        internalWsUrl: null,
      },
    );
    await this.publication.safely("node delete", () =>
      this.publication.publishNodes([node.id], [node.keyHash]),
    );
    await this.redis.del(this.names.nodeSessionKeys(node.id));
    return "deleted";
  }

  /** Marks the node ERROR when the job will not be retried (permanent failure or attempts exhausted). */
  async failed(job: Job<NodeOpPayload> | undefined, err: Error): Promise<void> {
    if (!job || !("nodeId" in (job.data ?? {}))) return;
    const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
    const node = await this.load(job.data.nodeId);
    if (!this.current(node, job.data)) return;
    if (!final) {
      await recordEvent(this.ds.manager, node.id, "RETRY", `${job.name} failed (will retry): ${err.message}`);
      return;
    }
    await this.setStatus(node, NodeStatus.ERROR, `${job.name} failed: ${err.message}`, {
      type: "ERROR",
      message: `${job.name} failed after ${job.attemptsMade} attempt(s): ${err.message}`,
    });
  }

  /** Sweep: SYNCING <-> SYNCED from the node's own RPC; restarts a node whose process is gone. */
  async syncSweep(): Promise<number> {
    const nodes = await this.ds.getRepository(DedicatedNode).find({
      where: [
        { desiredState: DesiredState.RUNNING, status: NodeStatus.SYNCING },
        { desiredState: DesiredState.RUNNING, status: NodeStatus.SYNCED },
      ],
      relations: { network: true },
    });
    await Promise.all(
      nodes.map((n) =>
        this.checkSync(n).catch((err) => this.log.warn({ err, nodeId: n.id }, "sync check failed")),
      ),
    );
    await this.reconcile().catch((err) => this.log.warn({ err }, "node reconcile failed"));
    return nodes.length;
  }

  /**
   * Re-enqueues the converging job of nodes whose operation has no job (an enqueue that failed after the
   * row was committed, a flushed Redis). Same job id as the original, so an existing job makes this a no-op.
   */
  async reconcile(): Promise<number> {
    const settleMs = 2000;
    const rows: { id: string; generation: number; status: NodeStatus; desired_state: DesiredState }[] =
      await this.ds.query(
        `SELECT id, generation, status, desired_state FROM dedicated_nodes
         WHERE updated_at < now() - ($1 || ' milliseconds')::interval
           AND ((desired_state = 'RUNNING' AND status IN ('PENDING', 'PROVISIONING'))
             OR (desired_state = 'STOPPED' AND status NOT IN ('STOPPED', 'ERROR'))
             OR (desired_state = 'DELETED' AND status = 'DELETING'))`,
        [String(settleMs)],
      );
    for (const r of rows) {
      const op =
        r.desired_state === DesiredState.DELETED
          ? JobName.DeleteNode
          : r.desired_state === DesiredState.STOPPED
            ? JobName.StopNode
            : r.status === NodeStatus.PENDING
              ? JobName.ProvisionNode
              : JobName.RollNode;
      const data = { nodeId: r.id, generation: r.generation };
      // A roll or provision of this generation may exist under either name.
      const other =
        op === JobName.RollNode
          ? JobName.ProvisionNode
          : op === JobName.ProvisionNode
            ? JobName.RollNode
            : op;
      if (await this.queue.getJob(nodeJobId(other, r.id, r.generation))) continue;
      await enqueueNodeJob(this.queue, this.cfg, op, data);
    }
    return rows.length;
  }

  private async checkSync(node: DedicatedNode): Promise<void> {
    const protocol = node.network.protocol as Protocol;
    const spec = specOf(node, protocol);
    const { running, reason: why } = await this.provider.status(spec, node.providerState);
    if (!running) {
      const reason = why ? `${why}; restarting` : "Node process not running; restarting";
      // Gone (crash, reboot): start it again under a new generation.
      const next = node.generation + 1;
      const r = await this.ds.getRepository(DedicatedNode).update(
        { id: node.id, generation: node.generation },
        {
          generation: next,
          status: NodeStatus.PROVISIONING,
          statusReason: reason,
        },
      );
      if (!r.affected) return;
      await recordEvent(this.ds.manager, node.id, "RESTART", reason);
      await this.publication.safely("node status", () => this.publication.publishNodes([node.id]));
      await emitNodeStatus(this.webhooks, node, node.status, NodeStatus.PROVISIONING, reason);
      await enqueueNodeJob(this.queue, this.cfg, JobName.ProvisionNode, {
        nodeId: node.id,
        generation: next,
      });
      return;
    }
    const url = node.internalHttpUrl;
    if (!url) return;
    let current: number;
    let highest: number;
    let peers: number;
    let synced: boolean;
    if (protocol === "SUBSTRATE") {
      const health = await rpc<{ isSyncing: boolean; peers: number }>(url, "system_health");
      const st = await rpc<{ currentBlock: number; highestBlock: number | null }>(url, "system_syncState");
      current = st.currentBlock;
      highest = st.highestBlock ?? st.currentBlock;
      peers = health.peers;
      synced = !health.isSyncing && current >= highest;
    } else {
      const syncing = await rpc<false | { currentBlock: string; highestBlock: string }>(url, "eth_syncing");
      current = hexToNumber(await rpc<string>(url, "eth_blockNumber"));
      highest = syncing === false ? current : Math.max(current, hexToNumber(syncing.highestBlock));
      peers = await rpc<string>(url, "net_peerCount").then(hexToNumber, () => 0);
      synced = syncing === false;
    }
    const fields: Partial<DedicatedNode> = { currentBlock: current, highestBlock: highest, peers };
    if (synced && node.status === NodeStatus.SYNCING) {
      await this.setStatus(
        node,
        NodeStatus.SYNCED,
        null,
        { type: "SYNCED", message: `Caught up at block ${current}` },
        { ...fields, syncedAt: node.syncedAt ?? new Date() },
        [NodeStatus.SYNCING],
      );
    } else if (!synced && node.status === NodeStatus.SYNCED) {
      await this.setStatus(
        node,
        NodeStatus.SYNCING,
        `Behind: block ${current} of ${highest}`,
        { type: "SYNCING", message: `Fell behind: block ${current} of ${highest}` },
        fields,
        [NodeStatus.SYNCED],
      );
    } else {
      await this.ds
        .getRepository(DedicatedNode)
        .update(
          { id: node.id, generation: node.generation },
          fields as QueryDeepPartialEntity<DedicatedNode>,
        );
    }
  }

  /** Sweep: validator status and setup facts of every running validator node. */
  async validatorSweep(): Promise<number> {
    const nodes = await this.ds.getRepository(DedicatedNode).find({
      where: [
        { nodeType: NodeType.VALIDATOR, desiredState: DesiredState.RUNNING, status: NodeStatus.SYNCED },
        { nodeType: NodeType.VALIDATOR, desiredState: DesiredState.RUNNING, status: NodeStatus.SYNCING },
      ],
    });
    await Promise.all(
      nodes.map((n) =>
        this.checkValidator(n).catch((err) => this.log.warn({ err, nodeId: n.id }, "validator check failed")),
      ),
    );
    return nodes.length;
  }

  private async checkValidator(node: DedicatedNode): Promise<void> {
    const repo = this.ds.getRepository(DedicatedNode);
    if (node.sessionKeysAt === null) {
      const raw = await this.redis.get(this.names.nodeSessionKeys(node.id));
      const rec = raw ? NodeSessionKeysRecordSchema.safeParse(JSON.parse(raw)) : undefined;
      if (rec?.success) {
        await repo.update({ id: node.id }, { sessionKeysAt: new Date(rec.data.atMs) });
        await recordEvent(
          this.ds.manager,
          node.id,
          "SESSION_KEYS",
          "Session keys generated (author_rotateKeys)",
        );
      }
    }
    const url = node.internalHttpUrl;
    if (!node.validatorStash || !url) return;
    const account = parseAccountId(node.validatorStash);
    const [prefs, active, nextKeys] = await Promise.all([
      rpc<string | null>(url, "state_getStorage", [stakingValidatorsKey(account)]),
      rpc<string | null>(url, "state_getStorage", [SESSION_VALIDATORS_KEY]),
      rpc<string | null>(url, "state_getStorage", [sessionNextKeysKey(account)]),
    ]);
    const activeSet = active ? decodeAccountIdVec(fromHex(active)) : [];
    const elected = activeSet.some((a) => a.equals(account));
    const status = elected
      ? ValidatorStatus.ELECTED
      : prefs
        ? ValidatorStatus.WAITING
        : ValidatorStatus.NOT_REGISTERED;
    const keysOnChain = nextKeys !== null;
    if (status !== node.validatorStatus || keysOnChain !== node.keysOnChain) {
      const r = await repo.update(
        { id: node.id, validatorStash: node.validatorStash },
        { validatorStatus: status, keysOnChain },
      );
      if (r.affected && status !== node.validatorStatus) {
        await recordEvent(this.ds.manager, node.id, "VALIDATOR_STATUS", `Validator status: ${status}`);
        await this.webhooks.emit(node.workspaceId, WebhookEventType.VALIDATOR_STATUS, {
          nodeId: node.id,
          displayName: node.displayName,
          stash: node.validatorStash,
          previousStatus: node.validatorStatus,
          status,
        });
      }
    }
  }
}

export function enqueueNodeJob(queue: Queue, cfg: NodeConfig, op: JobName, data: NodeOpPayload) {
  return queue.add(op, data, {
    jobId: nodeJobId(op, data.nodeId, data.generation),
    attempts: cfg.jobAttempts,
    backoff: { type: "exponential", delay: cfg.jobBackoffMs },
    removeOnComplete: 200,
    removeOnFail: 500,
  });
}

export interface NodeWorker {
  queue: Queue;
  worker: Worker;
  ops: NodeOperations;
  /** (Re)creates the repeatable sweeps. */
  ensureSchedulers(): Promise<void>;
  close(): Promise<void>;
}

/** Starts the QueueName.Nodes worker and its two repeatable sweeps. */
export async function startNodeWorker(deps: {
  ds: DataSource;
  redis: RedisClient;
  bullConnection: RedisClient;
  names: RedisNames;
  publication: PublicationService;
  provider: NodeProvider;
  cfg: NodeConfig;
  log: Logger;
  /** Announces node.status and validator.status (the worker's webhook emitter). */
  webhooks: WebhookEmitter;
}): Promise<NodeWorker> {
  const { cfg, log } = deps;
  const prefix = deps.names.bullPrefix(isCluster(deps.bullConnection));
  const queue = new Queue(QueueName.Nodes, { connection: deps.bullConnection, prefix });
  const ops = new NodeOperations(
    deps.ds,
    deps.provider,
    deps.publication,
    deps.redis,
    deps.names,
    queue,
    cfg,
    log,
    deps.webhooks,
  );
  const sweepOpts = { removeOnComplete: 20, removeOnFail: 50 };
  // Idempotent: also called again when Redis lost its data (worker/recovery.service.ts).
  const ensureSchedulers = async () => {
    await queue.upsertJobScheduler(
      NODE_SYNC_SCHEDULER_ID,
      { every: cfg.syncIntervalMs },
      { name: JobName.NodeSyncStatus, data: {}, opts: sweepOpts },
    );
    await queue.upsertJobScheduler(
      NODE_VALIDATOR_SCHEDULER_ID,
      { every: cfg.validatorIntervalMs },
      { name: JobName.NodeValidatorStatus, data: {}, opts: sweepOpts },
    );
  };
  await ensureSchedulers();
  const worker = new Worker(
    QueueName.Nodes,
    tracedProcessor(async (job: Job) => {
      switch (job.name as JobName) {
        case JobName.ProvisionNode:
          return ops.provisionOrRoll(job as Job<JobPayloads[JobName.ProvisionNode]>, false);
        case JobName.RollNode:
          return ops.provisionOrRoll(job as Job<JobPayloads[JobName.RollNode]>, true);
        case JobName.StopNode:
          return ops.stop(job as Job<JobPayloads[JobName.StopNode]>);
        case JobName.DeleteNode:
          return ops.delete(job as Job<JobPayloads[JobName.DeleteNode]>);
        case JobName.NodeSyncStatus:
          return ops.syncSweep();
        case JobName.NodeValidatorStatus:
          return ops.validatorSweep();
        default:
          throw new UnrecoverableError(`unknown job ${job.name}`);
      }
    }),
    {
      connection: deps.bullConnection,
      prefix,
      concurrency: cfg.concurrency,
      lockDuration: cfg.jobLockMs,
      stalledInterval: Math.max(500, Math.floor(cfg.jobLockMs / 2)),
    },
  );
  worker.on("failed", (job, err) => {
    log.error({ err, job: job?.name, data: job?.data }, "node job failed");
    void ops
      .failed(job as Job<NodeOpPayload> | undefined, err)
      .catch((e) => log.error({ err: e }, "could not record node job failure"));
  });
  worker.on("error", (err) => log.error({ err }, "node worker error"));
  await worker.waitUntilReady();
  log.info({ provider: deps.provider.name }, "node worker started");
  return {
    queue,
    worker,
    ops,
    ensureSchedulers,
    async close() {
      await worker.close();
      await queue.close();
    },
  };
}
