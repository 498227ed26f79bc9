import { Field, ID, ObjectType } from "type-graphql";
import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from "typeorm";

@ObjectType()
@Entity({ name: "accounts" })
export class Account {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  /** Stored lower-cased; unique. */
  @Field()
  @Column({ type: "text", unique: true })
  email: string;

  /** argon2id PHC string. Never exposed. */
  @Column({ name: "password_hash", type: "text" })
  passwordHash: string;

  /** Platform operator: its tokens act like ADMIN_TOKEN on platform resources (auth/context.ts). */
  @Field({ description: "A platform operator: sees the operator pages and may manage platform resources." })
  @Column({ name: "is_operator", type: "boolean", default: false })
  isOperator: boolean;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
