import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { Account } from "../accounts/account.entity";
import { WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";

/**
 * An invitation to join a workspace with a role. Only the SHA-256 of its token is stored (the token is
 * shown once, in `inviteMember`'s answer and its link). Pending = not accepted, not revoked, not expired;
 * accepting sets `acceptedAt` in the same transaction that adds the membership, so a token works once.
 */
@Entity({ name: "invitations" })
export class Invitation {
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @ManyToOne(() => Workspace, { onDelete: "CASCADE" })
  @JoinColumn({ name: "workspace_id" })
  workspace: Workspace;

  /** Lower-cased; the accepting account must have this email. */
  @Column({ type: "text" })
  email: string;

  /** Never OWNER (ownership is transferred, not invited). */
  @Column({ type: "text" })
  role: WorkspaceRole;

  @Column({ name: "token_hash", type: "text", unique: true })
  tokenHash: string;

  @Column({ name: "invited_by", type: "uuid", nullable: true })
  invitedBy: string | null;

  @ManyToOne(() => Account, { onDelete: "SET NULL" })
  @JoinColumn({ name: "invited_by" })
  inviter: Account | null;

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Column({ name: "expires_at", type: "timestamptz" })
  expiresAt: Date;

  @Column({ name: "accepted_at", type: "timestamptz", nullable: true })
  acceptedAt: Date | null;

  @Column({ name: "accepted_by", type: "uuid", nullable: true })
  acceptedBy: string | null;

  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt: Date | null;
}
