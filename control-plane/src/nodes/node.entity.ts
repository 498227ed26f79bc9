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
import { Network } from "../networks/network.entity";
import { Workspace } from "../workspaces/workspace.entity";
import { DesiredState, NodeStatus, NodeType, RpcMethods, ValidatorStatus } from "./node.types";

export const NODE_NAME_MAX = 64;

/** Provider bookkeeping persisted across worker restarts (local: pid, port, dirs; k8s: object names). */
export type ProviderState = Record<string, unknown>;

@ObjectType("DedicatedNode")
@Entity({ name: "dedicated_nodes" })
export class DedicatedNode {
  @Field(() => ID)
  @PrimaryGeneratedColumn("uuid")
  id: string;

  @Column({ name: "workspace_id", type: "uuid" })
  workspaceId: string;

  @ManyToOne(() => Workspace, { onDelete: "CASCADE" })
  @JoinColumn({ name: "workspace_id" })
  workspace: Workspace;

  @Column({ name: "network_id", type: "uuid" })
  networkId: string;

  @ManyToOne(() => Network, { onDelete: "RESTRICT" })
  @JoinColumn({ name: "network_id" })
  network: Network;

  @Field()
  @Column({ name: "display_name", type: "varchar", length: NODE_NAME_MAX })
  displayName: string;

  @Field(() => NodeType)
  @Column({ name: "node_type", type: "text" })
  nodeType: NodeType;

  @Field()
  @Column({ name: "image_version", type: "text" })
  imageVersion: string;

  @Field()
  @Column({ type: "text" })
  region: string;

  @Field()
  @Column({ name: "lightning_restore", type: "boolean", default: false })
  lightningRestore: boolean;

  @Column({ name: "rpc_methods", type: "text" })
  rpcMethods: RpcMethods;

  @Column({ name: "extra_args", type: "jsonb", default: () => "'[]'::jsonb" })
  extraArgs: string[];

  @Field(() => NodeStatus)
  @Column({ type: "text" })
  status: NodeStatus;

  @Field(() => String, { nullable: true })
  @Column({ name: "status_reason", type: "text", nullable: true })
  statusReason: string | null;

  @Column({ name: "desired_state", type: "text" })
  desiredState: DesiredState;

  /** Bumped by every operation (deploy, roll, stop, delete); jobs of an older generation do nothing. */
  @Column({ type: "integer", default: 0 })
  generation: number;

  @Column({ type: "text" })
  provider: string;

  @Column({ name: "provider_state", type: "jsonb", default: () => "'{}'::jsonb" })
  providerState: ProviderState;

  /** Internal RPC URLs (what the data plane forwards to); never shown to tenants. */
  @Column({ name: "internal_http_url", type: "text", nullable: true })
  internalHttpUrl: string | null;

  @Column({ name: "internal_ws_url", type: "text", nullable: true })
  internalWsUrl: string | null;

  @Column({ name: "key_hash", type: "text", unique: true })
  keyHash: string;

  @Column({ name: "key_ciphertext", type: "text" })
  keyCiphertext: string;

  @Column({ name: "current_block", type: "bigint", nullable: true, transformer: bigintOrNull() })
  currentBlock: number | null;

  @Column({ name: "highest_block", type: "bigint", nullable: true, transformer: bigintOrNull() })
  highestBlock: number | null;

  @Column({ type: "integer", nullable: true })
  peers: number | null;

  @Column({ name: "synced_at", type: "timestamptz", nullable: true })
  syncedAt: Date | null;

  @Column({ name: "validator_stash", type: "text", nullable: true })
  validatorStash: string | null;

  @Column({ name: "validator_status", type: "text", nullable: true })
  validatorStatus: ValidatorStatus | null;

  @Column({ name: "session_keys_at", type: "timestamptz", nullable: true })
  sessionKeysAt: Date | null;

  @Column({ name: "keys_on_chain", type: "boolean", default: false })
  keysOnChain: boolean;

  @Field()
  @CreateDateColumn({ name: "created_at", type: "timestamptz" })
  createdAt: Date;

  @Field()
  @UpdateDateColumn({ name: "updated_at", type: "timestamptz" })
  updatedAt: Date;
}

function bigintOrNull() {
  return {
    to: (v: number | null | undefined) => v,
    from: (v: string | null) => (v === null ? null : Number(v)),
  };
}
