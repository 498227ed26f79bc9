import { Field, ID, ObjectType } from "type-graphql";
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
import { WebhookEventType } from "./webhook.types";

/** Longest endpoint URL accepted (characters). */
export const WEBHOOK_URL_MAX = 2048;
export const WEBHOOK_DESCRIPTION_MAX = 200;

/**
 * Where a workspace wants its events POSTed. The signing secret is stored sealed to the row (AES-GCM,
 * additional data = table + row id, as API keys are) because the worker must sign with the secret itself;
 * it is shown once, when created or rotated.
 */
@ObjectType("WebhookEndpoint")
@Entity({ name: "webhook_endpoints" })
export class WebhookEndpoint {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Field(() => ID)
  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @ManyToOne(() => Workspace, { onDelete: "CASCADE" })
  @JoinColumn({ name: "workspace_id" })
  workspace: Workspace;

  /** In GraphQL through WebhookEndpointResolver.url (masked for a VIEWER). */
  @Column({ type: "text" })
  url: string;

  @Field(() => String, { nullable: true })
  @Column({ type: "varchar", length: WEBHOOK_DESCRIPTION_MAX, nullable: true })
  description: string | null;

  @Field(() => [WebhookEventType])
  @Column({ name: "event_types", type: "text", array: true })
  eventTypes: WebhookEventType[];

  @Field({ description: "A disabled endpoint receives no events (test events excepted)." })
  @Column({ type: "boolean", default: true })
  enabled: boolean;

  /** `v2.…` AES-256-GCM ciphertext of the `whsec_…` secret (KEY_ENCRYPTION_SECRET). */
  @Column({ name: "secret_ciphertext", type: "text" })
  secretCiphertext: string;

  @Field({ description: "When the current signing secret was created (at creation or the last rotation)." })
  @Column({ name: "secret_created_at", type: "timestamptz", default: () => "now()" })
  secretCreatedAt: Date;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Field()
  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date;
}
