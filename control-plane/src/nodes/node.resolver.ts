import { IsOptional, MaxLength } from "class-validator";
import {
  Arg,
  Ctx,
  Field,
  FieldResolver,
  Float,
  ID,
  InputType,
  Int,
  Mutation,
  ObjectType,
  Query,
  Resolver,
  Root,
} from "type-graphql";
import { badInput } from "../common/errors";
import type { GqlContext } from "../graphql/context";
import { Network } from "../networks/network.entity";
import { imageVersions, type Protocol } from "./catalog";
import { DedicatedNode, NODE_NAME_MAX } from "./node.entity";
import { specOf } from "./node.service";
import { NodeStatus, NodeType, RpcMethods, ValidatorStatus } from "./node.types";
import { DedicatedNodeEvent } from "./node-event.entity";

@InputType()
export class LaunchArgsInput {
  @Field(() => RpcMethods)
  rpcMethods: RpcMethods;

  @Field(() => [String], {
    defaultValue: [],
    description:
      "Extra command-line arguments for the node program, from a per-program allow-list of flags with numeric or enumerated values (--flag, --flag value or --flag=value, each flag once); anything else is refused with the flag named.",
  })
  extra: string[];
}

@InputType()
export class DeployDedicatedNodeInput {
  @Field()
  @MaxLength(NODE_NAME_MAX)
  displayName: string;

  @Field({ description: "Network slug (see `networks`)." })
  network: string;

  @Field(() => NodeType)
  nodeType: NodeType;

  @Field(() => String, { nullable: true, description: "Defaults to the latest of `imageVersions(network)`." })
  imageVersion?: string | null;

  @Field({ description: "One of `regions`." })
  region: string;

  @Field({ defaultValue: false, description: "Restore the data volume from a snapshot instead of syncing." })
  lightningRestore: boolean;

  @Field(() => LaunchArgsInput)
  launchArgs: LaunchArgsInput;
}

@InputType()
export class UpdateDedicatedNodeInput {
  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(NODE_NAME_MAX)
  displayName?: string | null;

  @Field(() => LaunchArgsInput, { nullable: true, description: "A change restarts (rolls) the node." })
  launchArgs?: LaunchArgsInput | null;
}

@ObjectType()
export class NodeSyncStatus {
  @Field(() => Float, { nullable: true })
  currentBlock: number | null;

  @Field(() => Float, { nullable: true })
  highestBlock: number | null;

  @Field(() => Int, { nullable: true })
  peers: number | null;
}

@ObjectType()
export class NodeEndpoints {
  @Field({ description: "`POST` JSON-RPC here; the node's key is part of the URL." })
  httpUrl: string;

  @Field()
  wsUrl: string;
}

@ObjectType()
export class NodeLaunchArgs {
  @Field(() => RpcMethods)
  rpcMethods: RpcMethods;

  @Field(() => [String])
  extra: string[];
}

@ObjectType()
export class NodeValidator {
  @Field(() => String, { nullable: true })
  stash: string | null;

  @Field(() => ValidatorStatus, { nullable: true, description: "Null until the first chain read." })
  status: ValidatorStatus | null;
}

@ObjectType()
export class ValidatorSetupStep {
  @Field()
  name: string;

  @Field()
  done: boolean;
}

@ObjectType()
export class ValidatorSetup {
  @Field(() => [ValidatorSetupStep])
  steps: ValidatorSetupStep[];
}

@ObjectType()
export class NodeResources {
  @Field(() => Float, { description: "CPU in cores (measured locally; requested on Kubernetes)." })
  cpu: number;

  @Field(() => Float, { description: "Memory in bytes." })
  memory: number;

  @Field(() => Float, { description: "Storage in bytes." })
  storage: number;
}

@ObjectType()
export class ImageVersion {
  @Field()
  version: string;

  @Field()
  image: string;

  @Field()
  latest: boolean;
}

/** Checklist of the validator setup, from what the worker recorded. */
export function validatorSteps(node: DedicatedNode): ValidatorSetupStep[] {
  const st = node.validatorStatus;
  return [
    { name: "Node synced", done: node.syncedAt !== null },
    { name: "Session keys generated", done: node.sessionKeysAt !== null },
    { name: "Session keys set on chain", done: node.keysOnChain },
    {
      name: "Registered as validator",
      done: st === ValidatorStatus.WAITING || st === ValidatorStatus.ELECTED,
    },
    { name: "In the waiting list", done: st === ValidatorStatus.WAITING || st === ValidatorStatus.ELECTED },
    { name: "Elected", done: st === ValidatorStatus.ELECTED },
    {
      name: "RPC methods back to Safe",
      done: node.sessionKeysAt !== null && node.rpcMethods === RpcMethods.SAFE,
    },
  ];
}

const RUNNING = new Set([NodeStatus.SYNCING, NodeStatus.SYNCED]);

@Resolver(() => DedicatedNode)
export class NodeResolver {
  @Query(() => [DedicatedNode], {
    description: "Dedicated nodes of the caller's workspace (not deleted ones).",
  })
  dedicatedNodes(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNode[]> {
    return ctx.services.nodes.list(ctx, workspaceId);
  }

  @Query(() => DedicatedNode)
  dedicatedNode(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<DedicatedNode> {
    return ctx.services.nodes.nodeForCaller(ctx, id);
  }

  @Query(() => [ImageVersion], { description: "Node images offered for a network, newest first." })
  async imageVersions(@Arg("network") network: string, @Ctx() ctx: GqlContext): Promise<ImageVersion[]> {
    const net = (await ctx.services.networks.list()).find((n) => n.slug === network);
    if (!net) throw badInput("network", `Unknown network "${network}"`);
    return imageVersions(net.protocol as Protocol).map((e, i) => ({
      version: e.version,
      image: e.image,
      latest: i === 0,
    }));
  }

  @Query(() => [String], { description: "Regions dedicated nodes can be deployed in." })
  regions(@Ctx() ctx: GqlContext): string[] {
    return ctx.services.nodes.config.regions;
  }

  @Mutation(() => DedicatedNode)
  deployDedicatedNode(
    @Arg("input", () => DeployDedicatedNodeInput) input: DeployDedicatedNodeInput,
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNode> {
    return ctx.services.nodes.deploy(ctx, input, workspaceId);
  }

  @Mutation(() => DedicatedNode)
  updateDedicatedNode(
    @Arg("id", () => ID) id: string,
    @Arg("input", () => UpdateDedicatedNodeInput) input: UpdateDedicatedNodeInput,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNode> {
    return ctx.services.nodes.update(ctx, id, input);
  }

  @Mutation(() => DedicatedNode)
  restartDedicatedNode(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<DedicatedNode> {
    return ctx.services.nodes.restart(ctx, id);
  }

  @Mutation(() => DedicatedNode)
  stopDedicatedNode(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<DedicatedNode> {
    return ctx.services.nodes.stop(ctx, id);
  }

  @Mutation(() => DedicatedNode, {
    description: "The key stops working at once; the node goes DELETING, then DELETED.",
  })
  deleteDedicatedNode(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<DedicatedNode> {
    return ctx.services.nodes.delete(ctx, id);
  }

  @Mutation(() => DedicatedNode, {
    description: "Replaces the node's key; the old one stops working at once.",
  })
  regenerateDedicatedNodeApiKey(
    @Arg("id", () => ID) id: string,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNode> {
    return ctx.services.nodes.regenerateKey(ctx, id);
  }

  @Mutation(() => DedicatedNode, {
    description: "Stash account (SS58 or 0x account id) whose validator status is tracked.",
  })
  setValidatorStash(
    @Arg("nodeId", () => ID) nodeId: string,
    @Arg("stash") stash: string,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNode> {
    return ctx.services.nodes.setValidatorStash(ctx, nodeId, stash);
  }

  @FieldResolver(() => ID)
  workspaceId(@Root() node: DedicatedNode): string {
    return node.workspaceId;
  }

  @FieldResolver(() => Network)
  async network(@Root() node: DedicatedNode, @Ctx() ctx: GqlContext): Promise<Network> {
    if (node.network) return node.network;
    return (await ctx.services.networks.list()).find((n) => n.id === node.networkId)!;
  }

  @FieldResolver(() => NodeSyncStatus)
  syncStatus(@Root() node: DedicatedNode): NodeSyncStatus {
    return { currentBlock: node.currentBlock, highestBlock: node.highestBlock, peers: node.peers };
  }

  @FieldResolver(() => String, {
    description: "The node endpoint's key; masked (apiKeyMasked) for a VIEWER of the workspace.",
  })
  async apiKey(@Root() node: DedicatedNode, @Ctx() ctx: GqlContext): Promise<string> {
    return (await ctx.services.nodes.apiKeyFor(ctx, node)).key;
  }

  @FieldResolver(() => Boolean, { description: "True when apiKey and the endpoints carry a masked key." })
  async apiKeyMasked(@Root() node: DedicatedNode, @Ctx() ctx: GqlContext): Promise<boolean> {
    return (await ctx.services.nodes.apiKeyFor(ctx, node)).masked;
  }

  @FieldResolver(() => NodeEndpoints, { nullable: true })
  async endpoints(@Root() node: DedicatedNode, @Ctx() ctx: GqlContext): Promise<NodeEndpoints | null> {
    if (node.status === NodeStatus.DELETED || node.status === NodeStatus.DELETING) return null;
    const key = encodeURIComponent((await ctx.services.nodes.apiKeyFor(ctx, node)).key);
    const { publicHttpUrl, publicWsUrl } = ctx.services.config;
    return {
      httpUrl: `${publicHttpUrl}/nodes/${node.id}/${key}`,
      wsUrl: `${publicWsUrl}/nodes/${node.id}/${key}`,
    };
  }

  @FieldResolver(() => NodeLaunchArgs)
  launchArgs(@Root() node: DedicatedNode): NodeLaunchArgs {
    return { rpcMethods: node.rpcMethods, extra: node.extraArgs };
  }

  @FieldResolver(() => NodeValidator, { nullable: true, description: "Validator nodes only." })
  validator(@Root() node: DedicatedNode): NodeValidator | null {
    if (node.nodeType !== NodeType.VALIDATOR) return null;
    return { stash: node.validatorStash, status: node.validatorStatus };
  }

  @FieldResolver(() => ValidatorSetup, { nullable: true, description: "Validator nodes only." })
  validatorSetup(@Root() node: DedicatedNode): ValidatorSetup | null {
    if (node.nodeType !== NodeType.VALIDATOR) return null;
    return { steps: validatorSteps(node) };
  }

  @FieldResolver(() => NodeResources, { nullable: true, description: "Null while the node is not running." })
  async resources(@Root() node: DedicatedNode, @Ctx() ctx: GqlContext): Promise<NodeResources | null> {
    if (!RUNNING.has(node.status)) return null;
    const protocol = (await this.network(node, ctx)).protocol as Protocol;
    return ctx.services.nodes.provider.resources(specOf(node, protocol), node.providerState);
  }

  @FieldResolver(() => [String], { description: "Last lines of the node program's log." })
  async logs(
    @Root() node: DedicatedNode,
    @Arg("tail", () => Int, { defaultValue: 100 }) tail: number,
    @Ctx() ctx: GqlContext,
  ): Promise<string[]> {
    if (tail < 1 || tail > 5000) throw badInput("tail", "tail must be 1..5000");
    if (node.status === NodeStatus.DELETED) return [];
    const protocol = (await this.network(node, ctx)).protocol as Protocol;
    return ctx.services.nodes.provider.logs(specOf(node, protocol), node.providerState, tail);
  }

  @FieldResolver(() => [DedicatedNodeEvent], { description: "History, oldest first (the last `limit`)." })
  events(
    @Root() node: DedicatedNode,
    @Arg("limit", () => Int, { defaultValue: 100 }) limit: number,
    @Ctx() ctx: GqlContext,
  ): Promise<DedicatedNodeEvent[]> {
    if (limit < 1 || limit > 1000) throw badInput("limit", "limit must be 1..1000");
    return ctx.services.nodes.events(node.id, limit);
  }
}
