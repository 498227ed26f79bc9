import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import { DataSource, EntityManager, In, Not } from "typeorm";
import { generateApiKey, hashApiKey, NODE_KEY_PREFIX } from "../../../shared/src/crypto/api-key";
import type { Logger } from "../../../shared/src/log/logger";
import { JobName, type NodeOpPayload, nodeJobId, QueueName } from "../../../shared/src/queue/names";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { parseAccountId } from "../../../shared/src/substrate/storage-keys";
import type { RequestContext } from "../auth/context";
import { badInput, forbidden, isUuid, notFound, unauthenticated } from "../common/errors";
import { openKey, sealKey, storeRebound } from "../common/key-ciphertext";
import { Network } from "../networks/network.entity";
import type { PublicationService } from "../publication/publication.service";
import { emitNodeStatus, type WebhookEmitter } from "../webhooks/webhook.emitter";
import { WebhookEventType } from "../webhooks/webhook.types";
import { maskKey, Permission } from "../workspaces/roles";
import type { WorkspaceService } from "../workspaces/workspace.service";
import { findImage, type Protocol } from "./catalog";
import { checkLaunchArgs, type LaunchDialect } from "./launch-args";
import type { NodeConfig } from "./node.config";
import { DedicatedNode, NODE_NAME_MAX } from "./node.entity";
import { COUNTED_STATUSES, DesiredState, NodeStatus, NodeType, RpcMethods } from "./node.types";
import { DedicatedNodeEvent } from "./node-event.entity";
import { NodeStatusHub } from "./node-status";
import type { NodeProvider, NodeSpec } from "./providers/provider";

export interface LaunchArgsInput {
  rpcMethods: RpcMethods;
  extra?: string[] | null;
}

export interface DeployInput {
  displayName: string;
  network: string;
  nodeType: NodeType;
  imageVersion?: string | null;
  region: string;
  lightningRestore?: boolean | null;
  launchArgs: LaunchArgsInput;
}

export interface UpdateInput {
  displayName?: string | null;
  launchArgs?: LaunchArgsInput | null;
}

function validName(raw: string): string {
  const name = raw.trim();
  if (name.length < 1 || name.length > NODE_NAME_MAX) {
    throw badInput("displayName", `Display name must be 1-${NODE_NAME_MAX} characters`);
  }
  return name;
}

/** Tenant extra args checked against the allow-list of the program that will run them (see launch-args.ts). */
export function validExtraArgs(extra: string[] | null | undefined, dialect: LaunchDialect): string[] {
  const args = extra ?? [];
  const r = checkLaunchArgs(dialect, args);
  if (!r.ok) throw badInput("launchArgs", r.message);
  return args;
}

/** Builds the provider's spec from a row (with its network loaded). */
export function specOf(node: DedicatedNode, protocol: Protocol): NodeSpec {
  const image = findImage(protocol, node.imageVersion) ?? findImage(protocol)!;
  return {
    nodeId: node.id,
    workspaceId: node.workspaceId,
    displayName: node.displayName,
    protocol,
    nodeType: node.nodeType,
    imageVersion: node.imageVersion,
    image: image.image,
    rpcPort: image.rpcPort,
    region: node.region,
    lightningRestore: node.lightningRestore,
    rpcMethods: node.rpcMethods,
    extraArgs: node.extraArgs,
    generation: node.generation,
  };
}

export async function recordEvent(
  m: EntityManager,
  nodeId: string,
  type: string,
  message: string,
): Promise<void> {
  await m.getRepository(DedicatedNodeEvent).insert({ nodeId, type, message });
}

/**
 * Dedicated nodes of a workspace: the GraphQL side. Writes the row (desired state + generation), records an
 * event, publishes the node's key and record, and enqueues the worker job that converges the node.
 */
export class NodeService {
  private queue: Queue | undefined;
  /** Status changes for the `dedicatedNodeStatus` subscription. */
  readonly statusHub: NodeStatusHub;

  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly publication: PublicationService,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly encryptionKey: Buffer,
    readonly config: NodeConfig,
    readonly provider: NodeProvider,
    private readonly log: Logger,
    private readonly webhooks: WebhookEmitter,
  ) {
    this.statusHub = new NodeStatusHub(redis, names, log);
  }

  private nodeQueue(): Queue {
    this.queue ??= new Queue(QueueName.Nodes, {
      connection: this.redis,
      prefix: this.names.bullPrefix(isCluster(this.redis)),
    });
    return this.queue;
  }

  async enqueue(op: JobName, node: Pick<DedicatedNode, "id" | "generation">): Promise<void> {
    const data: NodeOpPayload = { nodeId: node.id, generation: node.generation };
    await this.nodeQueue().add(op, data, {
      jobId: nodeJobId(op, node.id, node.generation),
      attempts: this.config.jobAttempts,
      backoff: { type: "exponential", delay: this.config.jobBackoffMs },
      removeOnComplete: 200,
      removeOnFail: 500,
    });
  }

  private async enqueueSafely(op: JobName, node: DedicatedNode): Promise<void> {
    try {
      await this.enqueue(op, node);
    } catch (err) {
      // The row records the desired state; the sync sweep re-enqueues converging work.
      this.log.error({ err, nodeId: node.id, op }, "could not enqueue node job");
    }
  }

  /**
   * A node the caller may act on with `permission` (default: see it); NOT_FOUND for another workspace's
   * node, FORBIDDEN when the caller's role lacks the permission.
   */
  async nodeForCaller(
    ctx: RequestContext,
    id: string,
    permission: Permission = Permission.Read,
  ): Promise<DedicatedNode> {
    if (!ctx.principal) throw unauthenticated();
    if (!isUuid(id)) throw notFound("Dedicated node");
    const node = await this.ds
      .getRepository(DedicatedNode)
      .findOne({ where: { id }, relations: { network: true } });
    if (!node) throw notFound("Dedicated node");
    await this.workspaces.check(ctx, node.workspaceId, permission, "Dedicated node");
    return node;
  }

  private async mutable(ctx: RequestContext, id: string): Promise<DedicatedNode> {
    const node = await this.nodeForCaller(ctx, id, Permission.ManageNodes);
    if (node.status === NodeStatus.DELETING || node.status === NodeStatus.DELETED) {
      throw badInput("id", "The node is being deleted");
    }
    return node;
  }

  async list(ctx: RequestContext, workspaceId?: string | null): Promise<DedicatedNode[]> {
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.Read);
    return this.ds.getRepository(DedicatedNode).find({
      where: { workspaceId: wsId, status: Not(NodeStatus.DELETED) },
      relations: { network: true },
      order: { createdAt: "ASC", id: "ASC" },
    });
  }

  async deploy(ctx: RequestContext, input: DeployInput, workspaceId?: string | null): Promise<DedicatedNode> {
    const displayName = validName(input.displayName);
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.ManageNodes);
    const network = await this.ds.getRepository(Network).findOneBy({ slug: input.network });
    if (!network) throw badInput("network", `Unknown network "${input.network}"`);
    const protocol = network.protocol as Protocol;
    const image = findImage(protocol, input.imageVersion);
    if (!image)
      throw badInput("imageVersion", `Unknown image version "${input.imageVersion}" for ${protocol}`);
    if (!this.config.regions.includes(input.region)) {
      throw badInput(
        "region",
        `Unknown region "${input.region}"; choose one of ${this.config.regions.join(", ")}`,
      );
    }
    if (input.nodeType === NodeType.VALIDATOR && protocol !== "SUBSTRATE") {
      throw badInput("nodeType", "Validator nodes are available on Substrate networks only");
    }
    const extra = validExtraArgs(input.launchArgs.extra, this.provider.dialect(protocol));
    const key = generateApiKey(NODE_KEY_PREFIX);
    const node = await this.ds.transaction(async (m) => {
      // Serialises deployments of one workspace so the plan limit holds under concurrency.
      const rows: { max_dedicated_nodes: number; name: string }[] = await m.query(
        `SELECT p.max_dedicated_nodes, p.name FROM workspaces w JOIN plans p ON p.id = w.plan_id
         WHERE w.id = $1 FOR UPDATE OF w`,
        [wsId],
      );
      const plan = rows[0];
      if (!plan) throw notFound("Workspace");
      const count = await m
        .getRepository(DedicatedNode)
        .countBy({ workspaceId: wsId, status: In(COUNTED_STATUSES) });
      if (count >= plan.max_dedicated_nodes) {
        throw forbidden(
          `Dedicated node limit reached: plan "${plan.name}" allows ${plan.max_dedicated_nodes} dedicated node(s); delete one or upgrade the plan`,
        );
      }
      const repo = m.getRepository(DedicatedNode);
      // The row id is chosen here so the key's ciphertext can be sealed to it.
      const id = randomUUID();
      const created = await repo.save(
        repo.create({
          id,
          workspaceId: wsId,
          networkId: network.id,
          displayName,
          nodeType: input.nodeType,
          imageVersion: image.version,
          region: input.region,
          lightningRestore: input.lightningRestore ?? false,
          rpcMethods: input.launchArgs.rpcMethods,
          extraArgs: extra,
          status: NodeStatus.PENDING,
          statusReason: null,
          desiredState: DesiredState.RUNNING,
          generation: 1,
          provider: this.provider.name,
          providerState: {},
          keyHash: hashApiKey(key),
          keyCiphertext: sealKey(key, this.encryptionKey, "dedicated_nodes", id),
        }),
      );
      await recordEvent(
        m,
        created.id,
        "DEPLOY",
        `Deploy requested: ${input.nodeType} ${protocol} ${image.version} in ${input.region}`,
      );
      return created;
    });
    node.network = network;
    await this.publication.safely("node deploy", () => this.publication.publishNodes([node.id]));
    await this.enqueueSafely(JobName.ProvisionNode, node);
    return node;
  }

  async update(ctx: RequestContext, id: string, input: UpdateInput): Promise<DedicatedNode> {
    const node = await this.mutable(ctx, id);
    const repo = this.ds.getRepository(DedicatedNode);
    if (input.displayName != null) node.displayName = validName(input.displayName);
    let roll = false;
    if (input.launchArgs != null) {
      const extra = validExtraArgs(
        input.launchArgs.extra,
        this.provider.dialect(node.network.protocol as Protocol),
      );
      if (
        input.launchArgs.rpcMethods !== node.rpcMethods ||
        JSON.stringify(extra) !== JSON.stringify(node.extraArgs)
      ) {
        node.rpcMethods = input.launchArgs.rpcMethods;
        node.extraArgs = extra;
        roll = node.desiredState === DesiredState.RUNNING;
      }
    }
    const previousStatus = node.status;
    await this.ds.transaction(async (m) => {
      if (roll) {
        node.generation += 1;
        node.status = NodeStatus.PROVISIONING;
        node.statusReason = "Rolling with new launch args";
      }
      await m.getRepository(DedicatedNode).save(node);
      if (input.launchArgs != null) {
        await recordEvent(
          m,
          node.id,
          "LAUNCH_ARGS",
          `Launch args: rpc-methods ${node.rpcMethods}${node.extraArgs.length ? `, extra ${node.extraArgs.join(" ")}` : ""}${roll ? " (rolling)" : ""}`,
        );
      }
    });
    // The gateway enforces the new rpc-methods at once, before the node has restarted.
    await this.publication.safely("node update", () => this.publication.publishNodes([node.id]));
    if (roll) {
      void emitNodeStatus(this.webhooks, node, previousStatus, node.status, node.statusReason);
      await this.enqueueSafely(JobName.RollNode, node);
    }
    return repo.findOneOrFail({ where: { id: node.id }, relations: { network: true } });
  }

  private async transition(
    ctx: RequestContext,
    id: string,
    desired: DesiredState,
    status: NodeStatus | null,
    event: string,
    op: JobName,
  ): Promise<DedicatedNode> {
    const node = await this.mutable(ctx, id);
    const previousStatus = node.status;
    node.generation += 1;
    node.desiredState = desired;
    if (status !== null) node.status = status;
    node.statusReason =
      status === null ? `${event.charAt(0)}${event.slice(1).toLowerCase()} requested` : null;
    await this.ds.transaction(async (m) => {
      await m.getRepository(DedicatedNode).save(node);
      await recordEvent(m, node.id, event, `${event.charAt(0)}${event.slice(1).toLowerCase()} requested`);
    });
    await this.publication.safely("node op", () => this.publication.publishNodes([node.id]));
    // Not awaited (here and below): with Redis down, queueing waits for the reconnect; the answer must not.
    void emitNodeStatus(this.webhooks, node, previousStatus, node.status, node.statusReason);
    await this.enqueueSafely(op, node);
    return node;
  }

  restart(ctx: RequestContext, id: string): Promise<DedicatedNode> {
    return this.transition(
      ctx,
      id,
      DesiredState.RUNNING,
      NodeStatus.PROVISIONING,
      "RESTART",
      JobName.RollNode,
    );
  }

  stop(ctx: RequestContext, id: string): Promise<DedicatedNode> {
    // The status stays until the worker has stopped the node (then STOPPED).
    return this.transition(ctx, id, DesiredState.STOPPED, null, "STOP", JobName.StopNode);
  }

  /** Deleting: the key stops working at once; the worker tears the node down, then DELETED. */
  async delete(ctx: RequestContext, id: string): Promise<DedicatedNode> {
    const existing = await this.nodeForCaller(ctx, id, Permission.ManageNodes);
    if (existing.status === NodeStatus.DELETING || existing.status === NodeStatus.DELETED) return existing;
    const node = await this.transition(
      ctx,
      id,
      DesiredState.DELETED,
      NodeStatus.DELETING,
      "DELETE",
      JobName.DeleteNode,
    );
    await this.publication.safely("node key revoke", () =>
      this.publication.publishNodes([node.id], [node.keyHash]),
    );
    return node;
  }

  async regenerateKey(ctx: RequestContext, id: string): Promise<DedicatedNode> {
    const node = await this.mutable(ctx, id);
    const old = node.keyHash;
    const key = generateApiKey(NODE_KEY_PREFIX);
    node.keyHash = hashApiKey(key);
    node.keyCiphertext = sealKey(key, this.encryptionKey, "dedicated_nodes", node.id);
    await this.ds.transaction(async (m) => {
      await m.getRepository(DedicatedNode).update(
        { id: node.id },
        {
          keyHash: node.keyHash,
          keyCiphertext: node.keyCiphertext,
        },
      );
      await recordEvent(m, node.id, "KEY_REGENERATED", "API key regenerated; the previous key was revoked");
    });
    await this.publication.safely("node key", () => this.publication.publishNodes([node.id], [old]));
    void this.webhooks.emit(node.workspaceId, WebhookEventType.KEY_REGENERATED, {
      kind: "node",
      nodeId: node.id,
      displayName: node.displayName,
      previousKeyExpiresAt: null,
    });
    return node;
  }

  async setValidatorStash(ctx: RequestContext, id: string, stash: string): Promise<DedicatedNode> {
    const node = await this.mutable(ctx, id);
    if (node.nodeType !== NodeType.VALIDATOR) throw badInput("nodeId", "Not a validator node");
    const value = stash.trim();
    try {
      parseAccountId(value);
    } catch {
      throw badInput("stash", "Stash must be an SS58 address or a 0x-prefixed 32-byte account id");
    }
    node.validatorStash = value;
    node.validatorStatus = null;
    node.keysOnChain = false;
    await this.ds.transaction(async (m) => {
      await m
        .getRepository(DedicatedNode)
        .update({ id: node.id }, { validatorStash: value, validatorStatus: null, keysOnChain: false });
      await recordEvent(m, node.id, "VALIDATOR_STASH", `Validator stash set to ${value}`);
    });
    return node;
  }

  /** The node's key as the caller may see it: masked for a VIEWER of its workspace (`apiKey` is internal). */
  async apiKeyFor(ctx: RequestContext, node: DedicatedNode): Promise<{ key: string; masked: boolean }> {
    const key = this.apiKey(node);
    return (await this.workspaces.seesKeys(ctx, node.workspaceId))
      ? { key, masked: false }
      : { key: maskKey(key), masked: true };
  }

  /**
   * The node's key in clear. A ciphertext that is not this row's throws KEY_UNREADABLE; a legacy
   * unbound one (normally rewritten at start) is rewritten bound in the background.
   */
  apiKey(node: DedicatedNode): string {
    const opened = openKey(node, this.encryptionKey, "dedicated_nodes");
    if (opened.rebound) {
      storeRebound(this.ds, "dedicated_nodes", node.id, node.keyCiphertext, opened.rebound).catch((err) =>
        this.log.warn({ err, nodeId: node.id }, "could not rewrite the node key's ciphertext bound"),
      );
    }
    return opened.key;
  }

  events(nodeId: string, limit: number): Promise<DedicatedNodeEvent[]> {
    return this.ds
      .getRepository(DedicatedNodeEvent)
      .find({ where: { nodeId }, order: { at: "DESC", id: "DESC" }, take: limit })
      .then((rows) => rows.reverse());
  }

  async close(): Promise<void> {
    await this.statusHub.close();
    await this.queue?.close();
  }
}
