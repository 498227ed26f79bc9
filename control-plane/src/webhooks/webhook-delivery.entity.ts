import { Field, ID, Int, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { WebhookDeliveryStatus } from "./webhook.types";
import type { WebhookAttempt } from "./webhook-attempt.entity";
import { WebhookEndpoint } from "./webhook-endpoint.entity";

/** One event for one endpoint; its attempts are `WebhookAttempt` rows. */
@ObjectType("WebhookDelivery")
@Entity({ name: "webhook_deliveries" })
export class WebhookDelivery {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Field(() => ID)
  @Column({ name: "endpoint_id", type: "uuid" })
  endpointId: string;

  @ManyToOne(() => WebhookEndpoint, { onDelete: "CASCADE" })
  @JoinColumn({ name: "endpoint_id" })
  endpoint: WebhookEndpoint;

  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @Field({ description: "The `webhook-id` header: the same on every attempt." })
  @Column({ name: "event_id", type: "text" })
  eventId: string;

  @Field({ description: "Wire name, e.g. quota.threshold (webhook.test for test events)." })
  @Column({ name: "event_type", type: "text" })
  eventType: string;

  @Field({ description: "The exact JSON body POSTed (and signed)." })
  @Column({ type: "text" })
  payload: string;

  @Field(() => WebhookDeliveryStatus)
  @Column({ type: "text" })
  status: WebhookDeliveryStatus;

  @Field(() => Int)
  @Column({ name: "attempt_count", type: "integer", default: 0 })
  attemptCount: number;

  @Field(() => Date, {
    nullable: true,
    description: "When the next attempt is due (PENDING after a failure).",
  })
  @Column({ name: "next_attempt_at", type: "timestamptz", nullable: true })
  nextAttemptAt: Date | null;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Field(() => Date, { nullable: true })
  @Column({ name: "completed_at", type: "timestamptz", nullable: true })
  completedAt: Date | null;

  /** Not a column: attempts loaded with a page of deliveries (one query for the page). */
  attempts?: WebhookAttempt[];
}
