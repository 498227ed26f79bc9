import { Field, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from "typeorm";

/** One line of a node's history (status changes, operations, failures), shown as `events`. */
@ObjectType("DedicatedNodeEvent")
@Entity({ name: "dedicated_node_events" })
@Index(["nodeId", "at"])
export class DedicatedNodeEvent {
  @PrimaryGeneratedColumn({ type: "bigint" })
  id: string;

  @Column({ name: "node_id", type: "uuid" })
  nodeId: string;

  @Field()
  @CreateDateColumn({ type: "timestamptz" })
  at: Date;

  @Field()
  @Column({ type: "text" })
  type: string;

  @Field()
  @Column({ type: "text" })
  message: string;
}
