import { Field, ID, Int, ObjectType, registerEnumType } from "type-graphql";
import { Column, CreateDateColumn, Entity, OneToMany, PrimaryGeneratedColumn } from "typeorm";
import { DEFAULT_LOGS_CHUNK_BLOCKS, DEFAULT_MAX_LOGS_BLOCK_RANGE } from "../../../shared/src/redis/records";
import { Upstream } from "./upstream.entity";

export enum NetworkProtocol {
  EVM = "EVM",
  SUBSTRATE = "SUBSTRATE",
}
registerEnumType(NetworkProtocol, { name: "NetworkProtocol" });

@ObjectType()
@Entity({ name: "networks" })
export class Network {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  /** Path segment on the data plane: `/{slug}/rpc`. */
  @Field()
  @Column({ type: "text", unique: true })
  slug: string;

  @Field()
  @Column({ type: "varchar", length: 64 })
  name: string;

  @Field(() => NetworkProtocol)
  @Column({ type: "text" })
  protocol: NetworkProtocol;

  @Field(() => Int, { nullable: true })
  @Column({ name: "chain_id", type: "integer", nullable: true })
  chainId: number | null;

  @Field()
  @Column({ name: "allow_debug", type: "boolean", default: false })
  allowDebug: boolean;

  @Field(() => Int, {
    description: "Most blocks one eth_getLogs (or eth_newFilter) may span on the shared nodes; 0 = no limit.",
  })
  @Column({ name: "max_logs_block_range", type: "integer", default: DEFAULT_MAX_LOGS_BLOCK_RANGE })
  maxLogsBlockRange: number;

  @Field(() => Int, {
    description:
      "eth_getLogs ranges longer than this many blocks are split into sub-ranges of at most this many, sent in parallel across the upstreams and merged; 0 = never split.",
  })
  @Column({ name: "logs_chunk_blocks", type: "integer", default: DEFAULT_LOGS_CHUNK_BLOCKS })
  logsChunkBlocks: number;

  @OneToMany(
    () => Upstream,
    (u) => u.network,
  )
  upstreams: Upstream[];

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
