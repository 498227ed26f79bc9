import { Field, ID, ObjectType, registerEnumType } from "type-graphql";
import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { Account } from "../accounts/account.entity";

export enum AccessTokenKind {
  /** Returned by signUp / logIn; expires after SESSION_TTL_SECONDS. */
  SESSION = "SESSION",
  /** Created with createAccessToken for automation; shown once. */
  PERSONAL = "PERSONAL",
}
registerEnumType(AccessTokenKind, { name: "AccessTokenKind" });

@ObjectType()
@Entity({ name: "access_tokens" })
export class AccessToken {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "account_id", type: "uuid" })
  accountId: string;

  @ManyToOne(() => Account, { onDelete: "CASCADE" })
  @JoinColumn({ name: "account_id" })
  account: Account;

  /** SHA-256 (hex) of the token; the token itself is never stored. */
  @Column({ name: "token_hash", type: "text", unique: true })
  tokenHash: string;

  @Field(() => AccessTokenKind)
  @Column({ type: "text" })
  kind: AccessTokenKind;

  @Field()
  @Column({ type: "varchar", length: 64 })
  name: string;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Field(() => Date, { nullable: true })
  @Column({ name: "expires_at", type: "timestamptz", nullable: true })
  expiresAt: Date | null;

  @Field(() => Date, { nullable: true })
  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt: Date | null;
}
