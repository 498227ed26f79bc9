import { IsOptional, MaxLength } from "class-validator";
import {
  Arg,
  Ctx,
  Field,
  FieldResolver,
  ID,
  InputType,
  Int,
  Mutation,
  Query,
  Resolver,
  Root,
} from "type-graphql";
import { isPlatformOperator } from "../auth/context";
import { forbidden } from "../common/errors";
import { GqlContext } from "../graphql/context";
import { Network, NetworkProtocol } from "./network.entity";
import { NETWORK_NAME_MAX, URL_MAX } from "./network.service";
import { Upstream, UpstreamArchiveMode, UpstreamMethodFamily } from "./upstream.entity";

@InputType()
export class CreateNetworkInput {
  @Field()
  @MaxLength(48)
  slug: string;

  @Field()
  @MaxLength(NETWORK_NAME_MAX)
  name: string;

  @Field(() => NetworkProtocol)
  protocol: NetworkProtocol;

  @Field(() => Int, { nullable: true })
  chainId?: number | null;

  @Field(() => Boolean, { nullable: true, description: "Let debug_* reach this network's shared nodes." })
  allowDebug?: boolean | null;

  @Field(() => Int, {
    nullable: true,
    description: "Most blocks one eth_getLogs may span (default 10000; 0 = no limit).",
  })
  maxLogsBlockRange?: number | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "eth_getLogs ranges longer than this many blocks are split into parallel sub-calls of at most this many (default 2000; 0 = never split).",
  })
  logsChunkBlocks?: number | null;
}

@InputType({ description: "Fields left out (or null) keep their value." })
export class UpdateNetworkInput {
  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(NETWORK_NAME_MAX)
  name?: string | null;

  @Field(() => Boolean, { nullable: true, description: "Let debug_* reach this network's shared nodes." })
  allowDebug?: boolean | null;

  @Field(() => Int, { nullable: true, description: "Most blocks one eth_getLogs may span; 0 = no limit." })
  maxLogsBlockRange?: number | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "eth_getLogs ranges longer than this many blocks are split into parallel sub-calls; 0 = never split.",
  })
  logsChunkBlocks?: number | null;
}

@InputType()
export class AddUpstreamInput {
  @Field()
  @MaxLength(URL_MAX)
  httpUrl: string;

  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(URL_MAX)
  wsUrl?: string | null;

  @Field(() => Int, { nullable: true, description: "Relative share of traffic, 1..1000 (default 1)." })
  weight?: number | null;

  @Field(() => UpstreamArchiveMode, { nullable: true, description: "Default AUTO (probed)." })
  archiveMode?: UpstreamArchiveMode | null;

  @Field(() => [UpstreamMethodFamily], {
    nullable: true,
    description: "Method families it serves (default: none declared).",
  })
  methodFamilies?: UpstreamMethodFamily[] | null;

  @Field(() => Int, {
    nullable: true,
    description: "Requests per second it should get, 1..1000000 (default: no budget; 0 = none).",
  })
  maxRequestsPerSecond?: number | null;
}

@InputType({ description: "Fields left out (or null) keep their value." })
export class UpdateUpstreamInput {
  @Field(() => Int, { nullable: true, description: "Relative share of traffic, 1..1000." })
  weight?: number | null;

  @Field(() => UpstreamArchiveMode, { nullable: true })
  archiveMode?: UpstreamArchiveMode | null;

  @Field(() => [UpstreamMethodFamily], {
    nullable: true,
    description: "Method families it serves; [] = none declared.",
  })
  methodFamilies?: UpstreamMethodFamily[] | null;

  @Field(() => Int, {
    nullable: true,
    description: "Requests per second it should get, 1..1000000; 0 = no budget.",
  })
  maxRequestsPerSecond?: number | null;
}

@Resolver(() => Network)
export class NetworkResolver {
  @Query(() => [Network], { description: "Readable by everyone; upstreams only by the operator." })
  networks(@Ctx() ctx: GqlContext): Promise<Network[]> {
    return ctx.services.networks.list();
  }

  @FieldResolver(() => [Upstream], { nullable: true, description: "Operator only." })
  upstreams(@Root() net: Network, @Ctx() ctx: GqlContext): Promise<Upstream[]> {
    if (!isPlatformOperator(ctx)) throw forbidden("Upstreams are visible to the operator only");
    return ctx.services.networks.upstreams(net.id);
  }

  @Mutation(() => Network, { description: "Operator only." })
  createNetwork(
    @Arg("input", () => CreateNetworkInput) input: CreateNetworkInput,
    @Ctx() ctx: GqlContext,
  ): Promise<Network> {
    return ctx.services.networks.create(ctx, input);
  }

  @Mutation(() => Network, { description: "Operator only." })
  updateNetwork(
    @Arg("slug", () => String) slug: string,
    @Arg("input", () => UpdateNetworkInput) input: UpdateNetworkInput,
    @Ctx() ctx: GqlContext,
  ): Promise<Network> {
    return ctx.services.networks.update(ctx, slug, input);
  }

  @Mutation(() => Upstream, { description: "Operator only." })
  addUpstream(
    @Arg("networkSlug", () => String) networkSlug: string,
    @Arg("input", () => AddUpstreamInput) input: AddUpstreamInput,
    @Ctx() ctx: GqlContext,
  ): Promise<Upstream> {
    return ctx.services.networks.addUpstream(ctx, networkSlug, input);
  }

  @Mutation(() => Upstream, {
    description:
      "Operator only. Edits an upstream's weight and capabilities; its URLs stay (remove and add to change them).",
  })
  updateUpstream(
    @Arg("networkSlug", () => String) networkSlug: string,
    @Arg("upstreamId", () => ID) upstreamId: string,
    @Arg("input", () => UpdateUpstreamInput) input: UpdateUpstreamInput,
    @Ctx() ctx: GqlContext,
  ): Promise<Upstream> {
    return ctx.services.networks.updateUpstream(ctx, networkSlug, upstreamId, input);
  }

  @Mutation(() => Network, {
    description:
      "Operator only. Removes the network and its upstreams (refused while dedicated nodes run on it); returns it.",
  })
  removeNetwork(@Arg("slug", () => String) slug: string, @Ctx() ctx: GqlContext): Promise<Network> {
    return ctx.services.networks.removeNetwork(ctx, slug);
  }

  @Mutation(() => Upstream, { description: "Operator only. Returns the removed upstream." })
  removeUpstream(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<Upstream> {
    return ctx.services.networks.removeUpstream(ctx, id);
  }
}
