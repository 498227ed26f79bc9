import { Field, ID, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { Plan } from "../plans/plan.entity";

@ObjectType()
@Entity({ name: "workspaces" })
export class Workspace {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Field()
  @Column({ type: "varchar", length: 64 })
  name: string;

  @Column({ name: "plan_id", type: "uuid" })
  planId: string;

  @ManyToOne(() => Plan, { onDelete: "RESTRICT" })
  @JoinColumn({ name: "plan_id" })
  plan: Plan;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
