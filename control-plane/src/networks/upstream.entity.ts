import { Field, ID, Int, ObjectType, registerEnumType } from "type-graphql";
import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import type { UpstreamArchiveMode as ArchiveModeName } from "../../../shared/src/redis/records";
import { Network } from "./network.entity";

/** The record's UPSTREAM_ARCHIVE_MODES (shared/src/redis/records.ts), as a GraphQL enum. */
export enum UpstreamArchiveMode {
  AUTO = "AUTO",
  ARCHIVE = "ARCHIVE",
  PRUNED = "PRUNED",
}
registerEnumType(UpstreamArchiveMode, {
  name: "UpstreamArchiveMode",
  description: "What the upstream keeps of the chain's state history.",
  valuesConfig: {
    AUTO: { description: "Not declared: the data plane probes the oldest block whose state it serves." },
    ARCHIVE: { description: "Every block's state (an archive node); never probed." },
    PRUNED: {
      description:
        "Recent state only, in a window that moves with its head (probed for the window's length).",
    },
  },
});

/** The record's UPSTREAM_METHOD_FAMILIES: GraphQL names DEBUG / TRACE, stored and published lower-case. */
export enum UpstreamMethodFamily {
  DEBUG = "debug",
  TRACE = "trace",
}
registerEnumType(UpstreamMethodFamily, {
  name: "UpstreamMethodFamily",
  description: "A method namespace not every node serves: debug_* or trace_*.",
});

/** Compile-time check that the GraphQL enum and the record's modes stay the same set. */
const _modes: Record<ArchiveModeName, UpstreamArchiveMode> = {
  AUTO: UpstreamArchiveMode.AUTO,
  ARCHIVE: UpstreamArchiveMode.ARCHIVE,
  PRUNED: UpstreamArchiveMode.PRUNED,
};
void _modes;

@ObjectType()
@Entity({ name: "upstreams" })
export class Upstream {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "network_id", type: "uuid" })
  networkId: string;

  @ManyToOne(
    () => Network,
    (n) => n.upstreams,
    { onDelete: "CASCADE" },
  )
  @JoinColumn({ name: "network_id" })
  network: Network;

  @Field()
  @Column({ name: "http_url", type: "text" })
  httpUrl: string;

  @Field(() => String, { nullable: true })
  @Column({ name: "ws_url", type: "text", nullable: true })
  wsUrl: string | null;

  /** Relative share of traffic, 1..1000. */
  @Field(() => Int)
  @Column({ type: "integer", default: 1 })
  weight: number;

  @Field(() => UpstreamArchiveMode)
  @Column({ name: "archive_mode", type: "text", default: UpstreamArchiveMode.AUTO })
  archiveMode: UpstreamArchiveMode;

  @Field(() => [UpstreamMethodFamily], {
    nullable: true,
    description:
      "Method families it serves; null = none declared. Once an upstream of the network declares any, debug_* / trace_* go only to upstreams declaring that family.",
  })
  @Column({ name: "method_families", type: "text", array: true, nullable: true })
  methodFamilies: UpstreamMethodFamily[] | null;

  @Field(() => Int, {
    nullable: true,
    description:
      "Requests per second it should get (batch elements count one each); past it other upstreams go first. null = no budget.",
  })
  @Column({ name: "max_requests_per_second", type: "integer", nullable: true })
  maxRequestsPerSecond: number | null;

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
