import { join } from "node:path";
import { z } from "zod";
import { env, parseEnv } from "../../../shared/src/config/env";
import type { Logger } from "../../../shared/src/log/logger";
import { DEFAULT_REGIONS } from "./catalog";
import { launchDialect } from "./launch-args";
import { KubernetesProvider, kubeApiFromDefaultConfig } from "./providers/kubernetes";
import { defaultLocalCommands, LocalProcessProvider } from "./providers/local";
import type { NodeProvider } from "./providers/provider";

const schema = z.object({
  /** Where dedicated nodes run: `local` (child processes of the worker) or `kubernetes`. */
  NODE_PROVIDER: z.enum(["local", "kubernetes"]).default("local"),
  /** Local provider: per-node base paths and logs. */
  NODES_DATA_DIR: z
    .string()
    .min(1)
    .default(join(process.cwd(), ".data", "nodes")),
  /** Local provider: program for SUBSTRATE nodes (space-separated; default: the Substrate test node CLI). */
  NODE_SUBSTRATE_COMMAND: z.string().optional(),
  /**
   * Launch-arg allow-list of the local SUBSTRATE program: `test-node` (polkadot's flags plus the test node's
   * integer knobs) or `polkadot`. Default: `test-node` with the default program, `polkadot` when
   * NODE_SUBSTRATE_COMMAND names another.
   */
  NODE_SUBSTRATE_FLAGS: z.enum(["test-node", "polkadot"]).optional(),
  /** Local provider: program for EVM nodes (default: anvil from @foundry-rs/anvil-linux-amd64). */
  NODE_EVM_COMMAND: z.string().optional(),
  /** How long a started node may take to answer RPC. */
  NODE_START_TIMEOUT_MS: env.int(30_000, 1000, 3_600_000),
  /** Regions offered to tenants (Kubernetes: values of topology.kubernetes.io/region). */
  NODE_REGIONS: env.list(DEFAULT_REGIONS.join(",")),
  /** Period of the sync-status sweep. */
  NODE_SYNC_INTERVAL_MS: env.int(5000, 100, 3_600_000),
  /** Period of the validator-status sweep. */
  NODE_VALIDATOR_INTERVAL_MS: env.int(10_000, 100, 3_600_000),
  /** Attempts of a node operation before the node goes to ERROR; backoff doubles from NODE_JOB_BACKOFF_MS. */
  NODE_JOB_ATTEMPTS: env.int(5, 1, 100),
  NODE_JOB_BACKOFF_MS: env.int(2000, 10, 600_000),
  /** BullMQ lock of an active node job; a job whose worker died is retried once its lock lapses. */
  NODE_JOB_LOCK_MS: env.int(30_000, 1000, 600_000),
  /** Node jobs one worker runs at once. */
  NODE_WORKER_CONCURRENCY: env.int(8, 1, 256),
  /** Kubernetes provider. */
  NODE_K8S_NAMESPACE: z.string().min(1).default("rpc-gateway-nodes"),
  NODE_K8S_STORAGE_CLASS: z.string().optional(),
  /** `SUBSTRATE=snapshot-name,EVM=snapshot-name`: VolumeSnapshots used by lightning restore. */
  NODE_K8S_SNAPSHOTS: env.list(""),
});

/** The environment schema: docs/contracts.md lists every variable (test/unit/docs/contracts.test.ts checks it). */
export const NodeEnvSchema = schema;

export interface NodeConfig {
  provider: "local" | "kubernetes";
  dataDir: string;
  substrateCommand: string[];
  evmCommand: string[];
  /** False when NODE_SUBSTRATE_COMMAND names another program (then only polkadot's flags are allowed). */
  substrateIsTestNode: boolean;
  startTimeoutMs: number;
  regions: string[];
  syncIntervalMs: number;
  validatorIntervalMs: number;
  jobAttempts: number;
  jobBackoffMs: number;
  jobLockMs: number;
  concurrency: number;
  k8sNamespace: string;
  k8sStorageClass?: string;
  k8sSnapshots: Record<string, string>;
}

export function loadNodeConfig(source: NodeJS.ProcessEnv = process.env): NodeConfig {
  const e = parseEnv(schema, source);
  const defaults = defaultLocalCommands();
  const split = (v: string | undefined, def: string[]) => (v ? v.split(" ").filter(Boolean) : def);
  const snapshots: Record<string, string> = {};
  for (const entry of e.NODE_K8S_SNAPSHOTS) {
    const [k, v] = entry.split("=");
    if (k && v) snapshots[k.trim().toUpperCase()] = v.trim();
  }
  return {
    provider: e.NODE_PROVIDER,
    dataDir: e.NODES_DATA_DIR,
    substrateCommand: split(e.NODE_SUBSTRATE_COMMAND, defaults.substrate),
    evmCommand: split(e.NODE_EVM_COMMAND, defaults.evm),
    substrateIsTestNode: e.NODE_SUBSTRATE_FLAGS
      ? e.NODE_SUBSTRATE_FLAGS === "test-node"
      : !e.NODE_SUBSTRATE_COMMAND,
    startTimeoutMs: e.NODE_START_TIMEOUT_MS,
    regions: e.NODE_REGIONS,
    syncIntervalMs: e.NODE_SYNC_INTERVAL_MS,
    validatorIntervalMs: e.NODE_VALIDATOR_INTERVAL_MS,
    jobAttempts: e.NODE_JOB_ATTEMPTS,
    jobBackoffMs: e.NODE_JOB_BACKOFF_MS,
    jobLockMs: e.NODE_JOB_LOCK_MS,
    concurrency: e.NODE_WORKER_CONCURRENCY,
    k8sNamespace: e.NODE_K8S_NAMESPACE,
    k8sStorageClass: e.NODE_K8S_STORAGE_CLASS,
    k8sSnapshots: snapshots,
  };
}

/** The configured provider. The Kubernetes API client is created lazily on first use. */
export function createNodeProvider(cfg: NodeConfig, log?: Logger): NodeProvider {
  if (cfg.provider === "kubernetes") {
    let real: Promise<KubernetesProvider> | undefined;
    const get = () => {
      real ??= kubeApiFromDefaultConfig().then(
        (api) =>
          new KubernetesProvider(api, {
            namespace: cfg.k8sNamespace,
            storageClassName: cfg.k8sStorageClass,
            snapshots: cfg.k8sSnapshots,
            log,
          }),
      );
      return real;
    };
    return {
      name: "kubernetes",
      dialect: (protocol) => launchDialect(protocol, "kubernetes"),
      provision: async (...a) => (await get()).provision(...a),
      roll: async (...a) => (await get()).roll(...a),
      stop: async (...a) => (await get()).stop(...a),
      delete: async (...a) => (await get()).delete(...a),
      status: async (...a) => (await get()).status(...a),
      logs: async (...a) => (await get()).logs(...a),
      resources: async (...a) => (await get()).resources(...a),
    };
  }
  return new LocalProcessProvider({
    dataDir: cfg.dataDir,
    substrateCommand: cfg.substrateCommand,
    evmCommand: cfg.evmCommand,
    substrateDialect: cfg.substrateIsTestNode === false ? "polkadot" : "substrate-test-node",
    startTimeoutMs: cfg.startTimeoutMs,
    log,
  });
}
