import { Field, ID, Int, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { Network } from "./network.entity";

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

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
