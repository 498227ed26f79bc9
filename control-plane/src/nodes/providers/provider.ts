import type { Protocol } from "../catalog";
import { type LaunchDialect, vetLaunchArgs } from "../launch-args";
import type { ProviderState } from "../node.entity";
import type { NodeType, RpcMethods } from "../node.types";

/** Everything a provider needs to run one node (built from the row; no secrets). */
export interface NodeSpec {
  nodeId: string;
  workspaceId: string;
  displayName: string;
  protocol: Protocol;
  nodeType: NodeType;
  imageVersion: string;
  /** Container image (Kubernetes). */
  image: string;
  rpcPort: number;
  region: string;
  lightningRestore: boolean;
  rpcMethods: RpcMethods;
  extraArgs: string[];
  generation: number;
}

export interface NodeEndpoints {
  /** Internal URLs the data plane forwards to. */
  httpUrl: string;
  wsUrl: string | null;
}

export interface ProvisionResult {
  state: ProviderState;
  endpoints: NodeEndpoints;
}

export interface NodeResources {
  /** CPU in cores (measured for local processes, requested for Kubernetes). */
  cpu: number;
  /** Memory in bytes. */
  memory: number;
  /** Storage in bytes. */
  storage: number;
}

/** Saves provider state at once (e.g. a pid right after spawn), before the operation completes. */
export type PersistState = (state: ProviderState) => Promise<void>;

/**
 * One place nodes run. Every operation is idempotent: it may be retried after a crash at any point with the
 * state last persisted, and converges (adopts what exists, creates what is missing).
 */
export interface NodeProvider {
  readonly name: string;
  /** Which allow-list the tenant's extra args are checked against (the program this provider runs). */
  dialect(protocol: Protocol): LaunchDialect;
  /** Creates (or adopts) the node and waits until its RPC answers. */
  provision(spec: NodeSpec, state: ProviderState, persist: PersistState): Promise<ProvisionResult>;
  /** Restarts with the spec's (new) launch args. */
  roll(spec: NodeSpec, state: ProviderState, persist: PersistState): Promise<ProvisionResult>;
  stop(spec: NodeSpec, state: ProviderState): Promise<ProviderState>;
  /** Tears everything down (process / workload, data). */
  delete(spec: NodeSpec, state: ProviderState): Promise<void>;
  /** Not running when gone, or (local) when the live process fails the adoption check: `reason` says why. */
  status(spec: NodeSpec, state: ProviderState): Promise<{ running: boolean; reason?: string }>;
  logs(spec: NodeSpec, state: ProviderState, tail: number): Promise<string[]>;
  resources(spec: NodeSpec, state: ProviderState): Promise<NodeResources>;
}

/**
 * The node program's launch arguments derived from the spec (same for every provider). The tenant's extra
 * args are re-checked against the dialect's allow-list here (throws LaunchArgsRefusedError) and passed in
 * canonical `--flag=value` form; the display name goes as `--name=<name>` so it can never be read as a flag.
 */
export function launchArgs(
  spec: NodeSpec,
  opts: { port: number; basePath: string; dialect: LaunchDialect },
): string[] {
  const extra = vetLaunchArgs(opts.dialect, spec.extraArgs);
  if (spec.protocol === "SUBSTRATE") {
    const args = [
      "--rpc-port",
      String(opts.port),
      "--rpc-methods",
      spec.rpcMethods === "UNSAFE" ? "Unsafe" : "Safe",
      "--base-path",
      opts.basePath,
      `--name=${spec.displayName}`,
    ];
    if (spec.nodeType === "VALIDATOR") args.push("--validator");
    if (spec.nodeType === "ARCHIVE") args.push("--state-pruning", "archive", "--blocks-pruning", "archive");
    return [...args, ...extra];
  }
  // EVM (anvil locally; geth-style flags on Kubernetes are added by that provider).
  return ["--port", String(opts.port), ...extra];
}
