import {
  Column,
  CreateDateColumn,
  Entity,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  Unique,
} from "typeorm";
import { Account } from "../accounts/account.entity";
import { WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";

@Entity({ name: "memberships" })
@Unique("uq_memberships_account_workspace", ["accountId", "workspaceId"])
export class Membership {
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "account_id", type: "uuid" })
  accountId: string;

  @ManyToOne(() => Account, { onDelete: "CASCADE" })
  @JoinColumn({ name: "account_id" })
  account: Account;

  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @ManyToOne(() => Workspace, { onDelete: "CASCADE" })
  @JoinColumn({ name: "workspace_id" })
  workspace: Workspace;

  @Column({ type: "text" })
  role: WorkspaceRole;

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
