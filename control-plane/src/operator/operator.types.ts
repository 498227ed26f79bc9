import { Field, Float, ID, Int, ObjectType } from "type-graphql";
import { WorkspaceRole } from "../workspaces/roles";

@ObjectType({ description: "One data-plane instance's view of an upstream (its health record)." })
export class UpstreamInstanceHealth {
  @Field() instanceId: string;
  @Field(() => Date, { description: "When the instance took it." }) at: Date;
  @Field({ description: "Selectable now: breaker closed, not backing off, not lagging too far." })
  healthy: boolean;
  @Field(() => Float, { description: "Last health-checked head; -1 = unknown." }) head: number;
  @Field(() => Int, { nullable: true, description: "Blocks behind the network head; null = unknown." })
  lagBlocks: number | null;
  @Field(() => Float, { description: "EWMA of answer latency, ms." }) latencyEwmaMs: number;
  @Field(() => Float, { description: "EWMA of the share of failed exchanges, 0..1." }) errorRate: number;
  @Field() breakerOpen: boolean;
}

@ObjectType({
  description:
    "An upstream's live health aggregated over the data-plane instances that published a record within its TTL.",
})
export class UpstreamHealthView {
  @Field(() => Int, { description: "Instances reporting this upstream (0: no live data)." })
  instances: number;
  @Field(() => Int, { description: "Of those, the ones that see it healthy." }) healthyInstances: number;
  @Field({ description: "Healthy on every reporting instance (false when none reports)." })
  healthy: boolean;
  @Field(() => Float, { nullable: true, description: "Highest head any instance saw." }) head: number | null;
  @Field(() => Int, { nullable: true, description: "Largest lag any instance saw, blocks." })
  lagBlocks: number | null;
  @Field(() => Float, { nullable: true, description: "Mean over instances of the latency EWMA, ms." })
  latencyMs: number | null;
  @Field(() => Float, { nullable: true, description: "Mean over instances of the error-rate EWMA, 0..1." })
  errorRate: number | null;
  @Field({ description: "The breaker is open on at least one instance." }) breakerOpen: boolean;
  @Field(() => [UpstreamInstanceHealth]) perInstance: UpstreamInstanceHealth[];
}

@ObjectType({ description: "A member of a workspace, as the operator sees it." })
export class WorkspaceMemberSummary {
  @Field(() => ID) accountId: string;
  @Field() email: string;
  @Field(() => WorkspaceRole) role: WorkspaceRole;
}

@ObjectType()
export class PlatformUsagePoint {
  @Field(() => Date, { description: "Start of the hour (ranges up to 7 days) or of the UTC day." }) at: Date;
  @Field(() => Float) requests: number;
  @Field(() => Float, { description: "Compute units of those requests." }) computeUnits: number;
  @Field(() => Float) errors: number;
}

@ObjectType({ description: "Requests and errors across every workspace (public endpoint included)." })
export class PlatformUsage {
  @Field(() => Date) from: Date;
  @Field(() => Date) to: Date;
  @Field(() => Float) requests: number;
  @Field(() => Float, { description: "Compute units of those requests." }) computeUnits: number;
  @Field(() => Float, { description: "Every category but success." }) errors: number;
  @Field(() => [PlatformUsagePoint]) series: PlatformUsagePoint[];
  @Field(() => [PlatformUsageByWorkspace], { description: "Busiest workspaces first (at most 20)." })
  byWorkspace: PlatformUsageByWorkspace[];
}

@ObjectType()
export class PlatformUsageByWorkspace {
  @Field(() => ID, { nullable: true, description: "Null: unknown-key and public-endpoint traffic." })
  workspaceId: string | null;
  @Field(() => String, { nullable: true }) workspaceName: string | null;
  @Field(() => Float) requests: number;
  @Field(() => Float, { description: "Compute units of those requests." }) computeUnits: number;
  @Field(() => Float) errors: number;
}
