import { Column, CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from "typeorm";
import { App } from "./app.entity";

/**
 * An app's API key. Live = not revoked and (no expiry or expiry in the future). An app has exactly one
 * current key (expiresAt null) and at most one previous key in its grace period (expiresAt set).
 */
@Entity({ name: "api_keys" })
export class ApiKey {
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "app_id", type: "uuid" })
  appId: string;

  @ManyToOne(() => App, { onDelete: "CASCADE" })
  @JoinColumn({ name: "app_id" })
  app: App;

  /** SHA-256 hex of the key: the lookup the data plane uses. */
  @Column({ name: "key_hash", type: "text", unique: true })
  keyHash: string;

  /** AES-256-GCM ciphertext of the key (KEY_ENCRYPTION_SECRET), so members can see it. */
  @Column({ name: "key_ciphertext", type: "text" })
  keyCiphertext: string;

  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  /** Set on a replaced key kept valid for a grace period. */
  @Column({ name: "expires_at", type: "timestamptz", nullable: true })
  expiresAt: Date | null;

  @Column({ name: "revoked_at", type: "timestamptz", nullable: true })
  revokedAt: Date | null;
}
