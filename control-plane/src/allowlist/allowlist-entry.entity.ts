import { Field, ID, ObjectType, registerEnumType } from "type-graphql";
import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  Unique,
} from "typeorm";
import { App } from "../apps/app.entity";

export enum AllowlistKind {
  ORIGIN = "ORIGIN",
  IP = "IP",
}
registerEnumType(AllowlistKind, { name: "AllowlistKind" });

@ObjectType()
@Entity({ name: "allowlist_entries" })
@Unique("uq_allowlist_entries_app_kind_value", ["appId", "kind", "value"])
export class AllowlistEntry {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "app_id", type: "uuid" })
  appId: string;

  @ManyToOne(() => App, { onDelete: "CASCADE" })
  @JoinColumn({ name: "app_id" })
  app: App;

  @Field(() => AllowlistKind)
  @Column({ type: "text" })
  kind: AllowlistKind;

  /** Normalised form (lower-case origin without trailing slash; canonical IP / CIDR). */
  @Field()
  @Column({ type: "text" })
  value: string;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
