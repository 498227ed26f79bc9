import { Field, ID, Int, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from "typeorm";

/** Postgres bigint comes back as a string; these limits fit comfortably in a JS number. */
export const bigintToNumber = {
  to: (v: number | null | undefined) => v,
  from: (v: string | null) => (v === null ? null : Number(v)),
};

const IN_FLIGHT_DOC =
  "Upstream calls in flight per app key (a single call holds 1, a batch 1 per upstream exchange); past it 429 concurrency_limit. Null = the data plane's MAX_IN_FLIGHT_PER_KEY.";
const HEAVY_IN_FLIGHT_DOC =
  "Heavy calls (eth_getLogs, debug_*, trace_*) in flight per app key, 1 per heavy element. Null = the data plane's MAX_HEAVY_IN_FLIGHT_PER_KEY.";

/** Operator-editable rows; seeded by a migration (free, growth, enterprise). */
@ObjectType()
@Entity({ name: "plans" })
export class Plan {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Field()
  @Column({ type: "text", unique: true })
  name: string;

  /** Response units per workspace per UTC day. */
  @Field(() => Int)
  @Column({ name: "daily_request_limit", type: "bigint", transformer: bigintToNumber })
  dailyRequestLimit: number;

  /** Requests per second per workspace (all its apps together); per node on dedicated-node endpoints. */
  @Field(() => Int)
  @Column({ name: "requests_per_second", type: "integer" })
  requestsPerSecond: number;

  /** Null = no monthly limit. Float in GraphQL because it may exceed 32 bits. */
  @Field(() => Number, { nullable: true })
  @Column({ name: "monthly_request_limit", type: "bigint", nullable: true, transformer: bigintToNumber })
  monthlyRequestLimit: number | null;

  /** Compute-unit limits (docs/compute-units.md); null = no limit in that unit (the plan counts requests). */
  @Field(() => Int, { nullable: true, description: "Compute units per second per workspace; null = none." })
  @Column({ name: "compute_units_per_second", type: "integer", nullable: true })
  computeUnitsPerSecond: number | null;

  @Field(() => Number, {
    nullable: true,
    description: "Compute units per workspace per UTC day; null = none.",
  })
  @Column({ name: "daily_compute_unit_limit", type: "bigint", nullable: true, transformer: bigintToNumber })
  dailyComputeUnitLimit: number | null;

  @Field(() => Number, {
    nullable: true,
    description: "Compute units per workspace per UTC month; null = none.",
  })
  @Column({ name: "monthly_compute_unit_limit", type: "bigint", nullable: true, transformer: bigintToNumber })
  monthlyComputeUnitLimit: number | null;

  @Field(() => Int)
  @Column({ name: "max_dedicated_nodes", type: "integer", default: 0 })
  maxDedicatedNodes: number;

  /** Apps a workspace on this plan may have; null = no plan limit (MAX_APPS_PER_WORKSPACE still applies). */
  @Field(() => Int, {
    nullable: true,
    description: "Apps a workspace on this plan may have (createApp refuses past it); null = no limit.",
  })
  @Column({ name: "max_apps", type: "integer", nullable: true })
  maxApps: number | null;

  /** Calls in flight per app key (a batch: per upstream exchange); null = the data plane's MAX_IN_FLIGHT_PER_KEY. */
  @Field(() => Int, { nullable: true, description: IN_FLIGHT_DOC })
  @Column({ name: "max_in_flight_per_key", type: "integer", nullable: true })
  maxInFlightPerKey: number | null;

  /** Heavy calls (eth_getLogs, debug_*, trace_*) in flight per key; null = MAX_HEAVY_IN_FLIGHT_PER_KEY. */
  @Field(() => Int, { nullable: true, description: HEAVY_IN_FLIGHT_DOC })
  @Column({ name: "max_heavy_in_flight_per_key", type: "integer", nullable: true })
  maxHeavyInFlightPerKey: number | null;

  /**
   * A workspace owner may switch to this plan itself (`changePlan`); any other plan is assigned by the
   * operator (`setWorkspacePlan`). Tenants see only self-service plans and their own current plan.
   */
  @Field({ description: "Owners may switch to it themselves (changePlan); otherwise operator-assigned." })
  @Column({ name: "self_service", type: "boolean", default: false })
  selfService: boolean;

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date;
}
