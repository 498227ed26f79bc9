import { Field, ID, ObjectType, registerEnumType } from "type-graphql";
import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from "typeorm";
import { Workspace } from "../workspaces/workspace.entity";

export enum AppEnvironment {
  PRODUCTION = "PRODUCTION",
  DEVELOPMENT = "DEVELOPMENT",
}
registerEnumType(AppEnvironment, { name: "AppEnvironment" });

export const APP_NAME_MAX = 64;

@ObjectType()
@Entity({ name: "apps" })
export class App {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @ManyToOne(() => Workspace, { onDelete: "CASCADE" })
  @JoinColumn({ name: "workspace_id" })
  workspace: Workspace;

  @Field()
  @Column({ type: "varchar", length: APP_NAME_MAX })
  name: string;

  @Field(() => AppEnvironment)
  @Column({ type: "text" })
  environment: AppEnvironment;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Field()
  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date;
}
