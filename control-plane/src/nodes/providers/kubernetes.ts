import { randomBytes } from "node:crypto";
import type {
  AppsV1Api,
  CoreV1Api,
  V1PersistentVolumeClaim,
  V1Secret,
  V1Service,
  V1StatefulSet,
} from "@kubernetes/client-node";
import type { Logger } from "../../../../shared/src/log/logger";
import { NODE_SIZING, type Protocol } from "../catalog";
import { type LaunchDialect, launchDialect, vetLaunchArgs } from "../launch-args";
import type { ProviderState } from "../node.entity";
import {
  launchArgs,
  type NodeProvider,
  type NodeResources,
  type NodeSpec,
  type PersistState,
  type ProvisionResult,
} from "./provider";

/** The calls this provider makes (a subset of @kubernetes/client-node's CoreV1Api / AppsV1Api). */
export interface KubeApi {
  core: Pick<
    CoreV1Api,
    | "createNamespacedSecret"
    | "readNamespacedSecret"
    | "deleteNamespacedSecret"
    | "createNamespacedPersistentVolumeClaim"
    | "readNamespacedPersistentVolumeClaim"
    | "deleteNamespacedPersistentVolumeClaim"
    | "createNamespacedService"
    | "readNamespacedService"
    | "deleteNamespacedService"
    | "readNamespacedPodLog"
  >;
  apps: Pick<
    AppsV1Api,
    | "createNamespacedStatefulSet"
    | "replaceNamespacedStatefulSet"
    | "readNamespacedStatefulSet"
    | "deleteNamespacedStatefulSet"
  >;
}

type KubeMethod = keyof KubeApi["core"] | keyof KubeApi["apps"];

/**
 * The RBAC permission each API call needs: the worker's Role (deploy/kubernetes/base/worker.yaml) grants
 * exactly these, in the nodes' namespace, and nothing else (the deploy test compares the two, and the unit
 * test checks that the provider calls every one of them and no other).
 */
export const KUBE_API_PERMISSIONS: Record<KubeMethod, { apiGroup: string; resource: string; verb: string }> =
  {
    createNamespacedSecret: { apiGroup: "", resource: "secrets", verb: "create" },
    readNamespacedSecret: { apiGroup: "", resource: "secrets", verb: "get" },
    deleteNamespacedSecret: { apiGroup: "", resource: "secrets", verb: "delete" },
    createNamespacedPersistentVolumeClaim: {
      apiGroup: "",
      resource: "persistentvolumeclaims",
      verb: "create",
    },
    readNamespacedPersistentVolumeClaim: { apiGroup: "", resource: "persistentvolumeclaims", verb: "get" },
    deleteNamespacedPersistentVolumeClaim: {
      apiGroup: "",
      resource: "persistentvolumeclaims",
      verb: "delete",
    },
    createNamespacedService: { apiGroup: "", resource: "services", verb: "create" },
    readNamespacedService: { apiGroup: "", resource: "services", verb: "get" },
    deleteNamespacedService: { apiGroup: "", resource: "services", verb: "delete" },
    readNamespacedPodLog: { apiGroup: "", resource: "pods/log", verb: "get" },
    createNamespacedStatefulSet: { apiGroup: "apps", resource: "statefulsets", verb: "create" },
    replaceNamespacedStatefulSet: { apiGroup: "apps", resource: "statefulsets", verb: "update" },
    readNamespacedStatefulSet: { apiGroup: "apps", resource: "statefulsets", verb: "get" },
    deleteNamespacedStatefulSet: { apiGroup: "apps", resource: "statefulsets", verb: "delete" },
  };

/**
 * The uid/gid node containers run as. Both images of the catalog run unprivileged: parity/polkadot's own
 * user is uid 1000, and geth (ethereum/client-go, root by default) needs nothing of root's, only a writable
 * datadir, which `fsGroup` gives it on the volume.
 */
export const NODE_UID = 1000;

/** Peer-to-peer ports the nodes' egress NetworkPolicy opens (node-networkpolicy.yaml), by protocol. */
export const NODE_P2P_PORTS = {
  EVM: [
    { protocol: "TCP", port: 30303 },
    { protocol: "UDP", port: 30303 },
  ],
  SUBSTRATE: [
    { protocol: "TCP", port: 30333 },
    { protocol: "TCP", port: 30334 },
  ],
} as const;

export interface KubernetesProviderOptions {
  namespace: string;
  /** StorageClass of the data PVC (cluster default when unset). */
  storageClassName?: string;
  /** VolumeSnapshot per protocol used by lightning restore, e.g. `{ SUBSTRATE: "polkadot-latest" }`. */
  snapshots?: Partial<Record<string, string>>;
  /** Cluster DNS suffix (default `svc.cluster.local`). */
  clusterDomain?: string;
  log?: Logger;
}

/** Real API clients from the default kubeconfig (KUBECONFIG, ~/.kube/config or in-cluster). */
export async function kubeApiFromDefaultConfig(): Promise<KubeApi> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  return { core: kc.makeApiClient(k8s.CoreV1Api), apps: kc.makeApiClient(k8s.AppsV1Api) };
}

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; response?: { statusCode?: unknown } };
  for (const c of [e?.code, e?.statusCode, e?.response?.statusCode]) if (typeof c === "number") return c;
  return undefined;
}

async function ignore404(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (statusCode(err) !== 404) throw err;
  }
}

const DATA_MOUNT = "/data";
const SECRET_MOUNT = "/secrets";

/** Parses a Kubernetes quantity ("500m", "8Gi", "2Ti", "4") to a number (cores or bytes). */
export function parseQuantity(q: string): number {
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(q);
  if (!m) return 0;
  const n = Number(m[1]);
  const units: Record<string, number> = {
    "": 1,
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  };
  return n * (units[m[2]!] ?? 1);
}

/**
 * One StatefulSet (1 replica) + ClusterIP Service + data PVC + Secret (the node's p2p key) per node, in one
 * namespace. Region -> nodeSelector `topology.kubernetes.io/region`; lightning restore -> the PVC's
 * `dataSource` is a VolumeSnapshot; rpc-methods and extra args are container args. Idempotent: existing
 * objects are kept (PVC, Secret) or replaced (StatefulSet, Service).
 */
export class KubernetesProvider implements NodeProvider {
  readonly name = "kubernetes";

  constructor(
    private readonly api: KubeApi,
    private readonly opts: KubernetesProviderOptions,
  ) {}

  dialect(protocol: Protocol): LaunchDialect {
    return launchDialect(protocol, this.name);
  }

  /** DNS-safe object name for a node: `node-<first 8 of id>-<rest>` is too long; the full uuid fits. */
  objectName(spec: Pick<NodeSpec, "nodeId">): string {
    return `rg-node-${spec.nodeId}`;
  }

  labels(spec: NodeSpec): Record<string, string> {
    return {
      "app.kubernetes.io/name": "rpc-gateway-node",
      "app.kubernetes.io/instance": this.objectName(spec),
      "app.kubernetes.io/managed-by": "rpc-gateway",
      "rpc-gateway/node-id": spec.nodeId,
      "rpc-gateway/workspace-id": spec.workspaceId,
    };
  }

  secretManifest(spec: NodeSpec): V1Secret {
    return {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: `${this.objectName(spec)}-keys`,
        namespace: this.opts.namespace,
        labels: this.labels(spec),
      },
      type: "Opaque",
      stringData: { "node-key": randomBytes(32).toString("hex") },
    };
  }

  pvcManifest(spec: NodeSpec): V1PersistentVolumeClaim {
    const snapshot = spec.lightningRestore ? this.opts.snapshots?.[spec.protocol] : undefined;
    if (spec.lightningRestore && !snapshot) {
      throw new Error(`lightning restore: no VolumeSnapshot configured for ${spec.protocol}`);
    }
    return {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: {
        name: `${this.objectName(spec)}-data`,
        namespace: this.opts.namespace,
        labels: this.labels(spec),
      },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: NODE_SIZING[spec.nodeType].storage } },
        ...(this.opts.storageClassName ? { storageClassName: this.opts.storageClassName } : {}),
        ...(snapshot
          ? { dataSource: { apiGroup: "snapshot.storage.k8s.io", kind: "VolumeSnapshot", name: snapshot } }
          : {}),
      },
    };
  }

  serviceManifest(spec: NodeSpec): V1Service {
    return {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: this.objectName(spec), namespace: this.opts.namespace, labels: this.labels(spec) },
      spec: {
        type: "ClusterIP",
        selector: { "app.kubernetes.io/instance": this.objectName(spec) },
        ports: [{ name: "rpc", port: spec.rpcPort, targetPort: spec.rpcPort, protocol: "TCP" }],
      },
    };
  }

  containerArgs(spec: NodeSpec): string[] {
    if (spec.protocol === "SUBSTRATE") {
      return [
        ...launchArgs(spec, { port: spec.rpcPort, basePath: DATA_MOUNT, dialect: this.dialect("SUBSTRATE") }),
        "--rpc-external",
        "--node-key-file",
        `${SECRET_MOUNT}/node-key`,
      ];
    }
    // Never `admin` or `personal`: admin_startHTTP / admin_addPeer / admin_exportChain reach beyond the node.
    const api = spec.rpcMethods === "UNSAFE" ? "eth,net,web3,txpool,debug" : "eth,net,web3";
    const extra = vetLaunchArgs(this.dialect("EVM"), spec.extraArgs);
    return [
      "--datadir",
      DATA_MOUNT,
      "--http",
      "--http.addr",
      "0.0.0.0",
      "--http.port",
      String(spec.rpcPort),
      "--http.api",
      api,
      "--ws",
      "--ws.addr",
      "0.0.0.0",
      "--ws.port",
      String(spec.rpcPort),
      "--ws.api",
      api,
      ...(spec.nodeType === "ARCHIVE" ? ["--gcmode", "archive", "--syncmode", "full"] : []),
      ...extra,
    ];
  }

  statefulSetManifest(spec: NodeSpec, replicas = 1): V1StatefulSet {
    const name = this.objectName(spec);
    const sizing = NODE_SIZING[spec.nodeType];
    return {
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: {
        name,
        namespace: this.opts.namespace,
        labels: this.labels(spec),
        annotations: { "rpc-gateway/generation": String(spec.generation) },
      },
      spec: {
        serviceName: name,
        replicas,
        selector: { matchLabels: { "app.kubernetes.io/instance": name } },
        template: {
          metadata: {
            labels: this.labels(spec),
            annotations: { "rpc-gateway/generation": String(spec.generation) },
          },
          spec: {
            nodeSelector: { "topology.kubernetes.io/region": spec.region },
            terminationGracePeriodSeconds: 120,
            // A tenant's node has no business with the Kubernetes API, nor with the other Services' addresses.
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: NODE_UID,
              runAsGroup: NODE_UID,
              // The data volume (and the key Secret) readable and writable by that group.
              fsGroup: NODE_UID,
              fsGroupChangePolicy: "OnRootMismatch",
              seccompProfile: { type: "RuntimeDefault" },
            },
            containers: [
              {
                name: "node",
                image: spec.image,
                args: this.containerArgs(spec),
                ports: [{ name: "rpc", containerPort: spec.rpcPort }],
                // Memory limit = request: a node that grows past its size is OOM-killed alone, not its
                // neighbours; CPU may burst to twice its request.
                resources: {
                  requests: { cpu: sizing.cpu, memory: sizing.memory },
                  limits: { cpu: String(parseQuantity(sizing.cpu) * 2), memory: sizing.memory },
                },
                securityContext: {
                  runAsNonRoot: true,
                  allowPrivilegeEscalation: false,
                  privileged: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
                readinessProbe: {
                  tcpSocket: { port: spec.rpcPort },
                  periodSeconds: 10,
                },
                volumeMounts: [
                  { name: "data", mountPath: DATA_MOUNT },
                  { name: "keys", mountPath: SECRET_MOUNT, readOnly: true },
                  { name: "tmp", mountPath: "/tmp" },
                ],
              },
            ],
            volumes: [
              { name: "data", persistentVolumeClaim: { claimName: `${name}-data` } },
              { name: "keys", secret: { secretName: `${name}-keys`, defaultMode: 0o440 } },
              // The only writable path besides the data volume (the root filesystem is read-only).
              { name: "tmp", emptyDir: { sizeLimit: "256Mi" } },
            ],
          },
        },
      },
    };
  }

  private endpoints(spec: NodeSpec) {
    const host = `${this.objectName(spec)}.${this.opts.namespace}.${this.opts.clusterDomain ?? "svc.cluster.local"}`;
    return { httpUrl: `http://${host}:${spec.rpcPort}`, wsUrl: `ws://${host}:${spec.rpcPort}` };
  }

  /** Create when missing; keep when present (PVC and Secret must never be recreated over data). */
  private async ensure(read: () => Promise<unknown>, create: () => Promise<unknown>): Promise<void> {
    try {
      await read();
      return;
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
    try {
      await create();
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
  }

  private async applyStatefulSet(spec: NodeSpec, replicas: number): Promise<void> {
    const namespace = this.opts.namespace;
    const name = this.objectName(spec);
    const body = this.statefulSetManifest(spec, replicas);
    try {
      const current = await this.api.apps.readNamespacedStatefulSet({ name, namespace });
      body.metadata = { ...body.metadata, resourceVersion: current.metadata?.resourceVersion };
      await this.api.apps.replaceNamespacedStatefulSet({ name, namespace, body });
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
      await this.api.apps.createNamespacedStatefulSet({ namespace, body });
    }
  }

  async provision(spec: NodeSpec, _state: ProviderState, persist: PersistState): Promise<ProvisionResult> {
    const namespace = this.opts.namespace;
    const name = this.objectName(spec);
    await this.ensure(
      () => this.api.core.readNamespacedSecret({ name: `${name}-keys`, namespace }),
      () => this.api.core.createNamespacedSecret({ namespace, body: this.secretManifest(spec) }),
    );
    await this.ensure(
      () => this.api.core.readNamespacedPersistentVolumeClaim({ name: `${name}-data`, namespace }),
      () => this.api.core.createNamespacedPersistentVolumeClaim({ namespace, body: this.pvcManifest(spec) }),
    );
    await this.ensure(
      () => this.api.core.readNamespacedService({ name, namespace }),
      () => this.api.core.createNamespacedService({ namespace, body: this.serviceManifest(spec) }),
    );
    await this.applyStatefulSet(spec, 1);
    const state: ProviderState = { namespace, name, generation: spec.generation };
    await persist(state);
    return { state, endpoints: this.endpoints(spec) };
  }

  async roll(spec: NodeSpec, state: ProviderState, persist: PersistState): Promise<ProvisionResult> {
    // Replacing the StatefulSet's pod template (new args, new generation annotation) rolls the pod.
    return this.provision(spec, state, persist);
  }

  async stop(spec: NodeSpec, state: ProviderState): Promise<ProviderState> {
    // Scaled to zero nothing runs the args; a stored arg the allow-list refuses must not make a node unstoppable.
    await this.applyStatefulSet({ ...spec, extraArgs: [] }, 0);
    return { ...state, stopped: true };
  }

  async delete(spec: NodeSpec, _state: ProviderState): Promise<void> {
    const namespace = this.opts.namespace;
    const name = this.objectName(spec);
    await ignore404(this.api.apps.deleteNamespacedStatefulSet({ name, namespace }));
    await ignore404(this.api.core.deleteNamespacedService({ name, namespace }));
    await ignore404(this.api.core.deleteNamespacedPersistentVolumeClaim({ name: `${name}-data`, namespace }));
    await ignore404(this.api.core.deleteNamespacedSecret({ name: `${name}-keys`, namespace }));
  }

  async status(spec: NodeSpec, _state: ProviderState): Promise<{ running: boolean }> {
    try {
      const sts = await this.api.apps.readNamespacedStatefulSet({
        name: this.objectName(spec),
        namespace: this.opts.namespace,
      });
      return { running: (sts.status?.readyReplicas ?? 0) >= 1 };
    } catch (err) {
      if (statusCode(err) === 404) return { running: false };
      throw err;
    }
  }

  async logs(spec: NodeSpec, _state: ProviderState, tail: number): Promise<string[]> {
    try {
      const text = await this.api.core.readNamespacedPodLog({
        name: `${this.objectName(spec)}-0`,
        namespace: this.opts.namespace,
        container: "node",
        tailLines: tail,
      });
      const lines = String(text).split("\n");
      if (lines.at(-1) === "") lines.pop();
      return lines.slice(-tail);
    } catch (err) {
      if (statusCode(err) === 404 || statusCode(err) === 400) return [];
      throw err;
    }
  }

  async resources(spec: NodeSpec, _state: ProviderState): Promise<NodeResources> {
    const s = NODE_SIZING[spec.nodeType];
    return { cpu: parseQuantity(s.cpu), memory: parseQuantity(s.memory), storage: parseQuantity(s.storage) };
  }
}
