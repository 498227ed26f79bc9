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

export enum JwtAlgorithm {
  RS256 = "RS256",
  ES256 = "ES256",
}
registerEnumType(JwtAlgorithm, {
  name: "JwtAlgorithm",
  description: "RS256: RSA (2048 bits or more) with SHA-256; ES256: ECDSA on P-256 with SHA-256.",
});

/**
 * A public key an app's JWTs may be signed with (at most MAX_JWT_KEYS_PER_APP per app). Stored as the
 * public JWK the control plane derived from the PEM or JWK it was given; never a private key.
 */
@ObjectType("JwtKey")
@Entity({ name: "app_jwt_keys" })
@Unique("uq_app_jwt_keys_app_kid", ["appId", "kid"])
export class AppJwtKey {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "app_id", type: "uuid" })
  appId: string;

  @ManyToOne(() => App, { onDelete: "CASCADE" })
  @JoinColumn({ name: "app_id" })
  app: App;

  @Field({ description: "Key id: a token's kid header selects the key (without kid every key is tried)." })
  @Column({ type: "text" })
  kid: string;

  @Field(() => JwtAlgorithm)
  @Column({ type: "text" })
  algorithm: JwtAlgorithm;

  /** The public JWK (`kty`, `n`/`e` or `crv`/`x`/`y`). */
  @Column({ type: "jsonb" })
  jwk: Record<string, string>;

  @Field({ description: "RFC 7638 SHA-256 thumbprint of the public key (base64url), to tell keys apart." })
  @Column({ type: "text" })
  thumbprint: string;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;
}
