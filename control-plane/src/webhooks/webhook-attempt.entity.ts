import { Field, Int, ObjectType } from "type-graphql";
import { Column, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { WebhookDelivery } from "./webhook-delivery.entity";

/** Characters of a response body kept per attempt (the rest is not read). */
export const RESPONSE_EXCERPT_MAX = 256;

/** One POST of a delivery: its HTTP status or the error that prevented one. */
@ObjectType("WebhookAttempt")
@Entity({ name: "webhook_attempts" })
export class WebhookAttempt {
  @PrimaryGeneratedColumn({ type: "bigint" })
  id: string;

  @Column({ name: "delivery_id", type: "uuid" })
  deliveryId: string;

  @ManyToOne(() => WebhookDelivery, { onDelete: "CASCADE" })
  @JoinColumn({ name: "delivery_id" })
  delivery: WebhookDelivery;

  @Field(() => Int, { description: "1 for the first attempt." })
  @Column({ type: "integer" })
  attempt: number;

  @Field(() => Int, { nullable: true, description: "HTTP status of the answer; null when none came." })
  @Column({ name: "status_code", type: "integer", nullable: true })
  statusCode: number | null;

  @Field(() => String, {
    nullable: true,
    description: "Why no 2xx: timeout, refused address, connection error.",
  })
  @Column({ type: "text", nullable: true })
  error: string | null;

  @Field(() => Int)
  @Column({ name: "duration_ms", type: "integer" })
  durationMs: number;

  @Field(() => String, {
    nullable: true,
    description: `First ${RESPONSE_EXCERPT_MAX} characters of the answer's body.`,
  })
  @Column({ name: "response_excerpt", type: "text", nullable: true })
  responseExcerpt: string | null;

  @Field()
  @Column({ type: "timestamptz" })
  at: Date;
}
