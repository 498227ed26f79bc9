import { registerEnumType } from "type-graphql";

export enum NodeType {
  FULL = "FULL",
  ARCHIVE = "ARCHIVE",
  VALIDATOR = "VALIDATOR",
}
registerEnumType(NodeType, { name: "DedicatedNodeType" });

/** docs/architecture.md#dedicated-nodes: PENDING -> PROVISIONING -> SYNCING -> SYNCED, plus the rest. */
export enum NodeStatus {
  PENDING = "PENDING",
  PROVISIONING = "PROVISIONING",
  SYNCING = "SYNCING",
  SYNCED = "SYNCED",
  STOPPED = "STOPPED",
  ERROR = "ERROR",
  DELETING = "DELETING",
  DELETED = "DELETED",
}
registerEnumType(NodeStatus, { name: "DedicatedNodeStatus" });

export enum RpcMethods {
  SAFE = "SAFE",
  UNSAFE = "UNSAFE",
}
registerEnumType(RpcMethods, { name: "RpcMethods" });

export enum ValidatorStatus {
  NOT_REGISTERED = "NOT_REGISTERED",
  WAITING = "WAITING",
  ELECTED = "ELECTED",
}
registerEnumType(ValidatorStatus, { name: "ValidatorStatus" });

/** What the operator wants; the workers converge the node's status to it. */
export enum DesiredState {
  RUNNING = "RUNNING",
  STOPPED = "STOPPED",
  DELETED = "DELETED",
}

/** States in which a node counts against the plan's maxDedicatedNodes. */
export const COUNTED_STATUSES = [
  NodeStatus.PENDING,
  NodeStatus.PROVISIONING,
  NodeStatus.SYNCING,
  NodeStatus.SYNCED,
  NodeStatus.STOPPED,
  NodeStatus.ERROR,
  NodeStatus.DELETING,
];
