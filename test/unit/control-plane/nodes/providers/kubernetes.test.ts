import assert from "node:assert/strict";
import { findImage } from "../../../../../control-plane/src/nodes/catalog";
import { NodeType, RpcMethods } from "../../../../../control-plane/src/nodes/node.types";
import {
  KUBE_API_PERMISSIONS,
  type KubeApi,
  KubernetesProvider,
  parseQuantity,
} from "../../../../../control-plane/src/nodes/providers/kubernetes";
import type { NodeSpec } from "../../../../../control-plane/src/nodes/providers/provider";

// biome-ignore lint/suspicious/noExplicitAny: the stub stores manifests as plain objects
type Obj = any;

/** Records every API call (method + params) and keeps objects in memory, answering 404 / 409 like the API. */
class RecordingKubeApi {
  readonly calls: { method: string; params: Obj }[] = [];
  readonly objects = new Map<string, Obj>();
  readyReplicas = 0;
  podLog = "line 1\nline 2\nline 3\n";

  private fail(code: number): never {
    throw Object.assign(new Error(`HTTP ${code}`), { code });
  }

  private kind(method: string): string {
    return method.replace(/^(create|read|replace|delete)Namespaced/, "");
  }

  private handle(method: string, params: Obj): Obj {
    this.calls.push({ method, params: structuredClone(params) });
    const kind = this.kind(method);
    if (method === "readNamespacedPodLog") return this.podLog;
    const name = params.name ?? params.body?.metadata?.name;
    const key = `${kind}/${params.namespace}/${name}`;
    if (method.startsWith("create")) {
      if (this.objects.has(key)) this.fail(409);
      this.objects.set(key, structuredClone(params.body));
      return params.body;
    }
    if (method.startsWith("read")) {
      const o = this.objects.get(key);
      if (!o) this.fail(404);
      if (kind === "StatefulSet")
        return {
          ...o,
          metadata: { ...o.metadata, resourceVersion: "7" },
          status: { readyReplicas: this.readyReplicas },
        };
      return o;
    }
    if (method.startsWith("replace")) {
      if (!this.objects.has(key)) this.fail(404);
      this.objects.set(key, structuredClone(params.body));
      return params.body;
    }
    if (method.startsWith("delete")) {
      if (!this.objects.delete(key)) this.fail(404);
      return {};
    }
    throw new Error(`unexpected ${method}`);
  }

  api(): KubeApi {
    const proxy = () =>
      new Proxy(
        {},
        { get: (_t, method: string) => async (params: Obj) => this.handle(method, params) },
      ) as Obj;
    return { core: proxy(), apps: proxy() } as KubeApi;
  }

  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  get(kind: string, name: string): Obj {
    return this.objects.get(`${kind}/rpc-nodes/${name}`);
  }
}

const NODE_ID = "0b5a3c1e-8a4d-4b7e-9c61-2f1d5e6a7b8c";
const NAME = `rg-node-${NODE_ID}`;

function spec(over: Partial<NodeSpec> = {}): NodeSpec {
  const img = findImage("SUBSTRATE")!;
  return {
    nodeId: NODE_ID,
    workspaceId: "ws-1",
    displayName: "validator one",
    protocol: "SUBSTRATE",
    nodeType: NodeType.VALIDATOR,
    imageVersion: img.version,
    image: img.image,
    rpcPort: img.rpcPort,
    region: "eu-west-1",
    lightningRestore: true,
    rpcMethods: RpcMethods.UNSAFE,
    extraArgs: ["--chain", "polkadot"],
    generation: 1,
    ...over,
  };
}

describe("KubernetesProvider against a recording API stub", () => {
  let stub: RecordingKubeApi;
  let provider: KubernetesProvider;
  const persisted: Obj[] = [];

  beforeEach(() => {
    stub = new RecordingKubeApi();
    provider = new KubernetesProvider(stub.api(), {
      namespace: "rpc-nodes",
      storageClassName: "fast-ssd",
      snapshots: { SUBSTRATE: "polkadot-snap-2026-11" },
    });
    persisted.length = 0;
  });

  it("provision: Secret, PVC (from a VolumeSnapshot), Service, StatefulSet, in that order", async () => {
    const res = await provider.provision(spec(), {}, async (s) => {
      persisted.push(s);
    });
    assert.deepEqual(stub.methods(), [
      "readNamespacedSecret",
      "createNamespacedSecret",
      "readNamespacedPersistentVolumeClaim",
      "createNamespacedPersistentVolumeClaim",
      "readNamespacedService",
      "createNamespacedService",
      "readNamespacedStatefulSet",
      "createNamespacedStatefulSet",
    ]);
    assert.equal(res.endpoints.httpUrl, `http://${NAME}.rpc-nodes.svc.cluster.local:9944`);
    assert.equal(res.endpoints.wsUrl, `ws://${NAME}.rpc-nodes.svc.cluster.local:9944`);
    assert.deepEqual(persisted, [{ namespace: "rpc-nodes", name: NAME, generation: 1 }]);

    const secret = stub.get("Secret", `${NAME}-keys`);
    assert.match(secret.stringData["node-key"], /^[0-9a-f]{64}$/);
    const pvc = stub.get("PersistentVolumeClaim", `${NAME}-data`);
    assert.deepEqual(pvc.spec.dataSource, {
      apiGroup: "snapshot.storage.k8s.io",
      kind: "VolumeSnapshot",
      name: "polkadot-snap-2026-11",
    });
    assert.equal(pvc.spec.storageClassName, "fast-ssd");
    assert.equal(pvc.spec.resources.requests.storage, "500Gi");
    const svc = stub.get("Service", NAME);
    assert.deepEqual(svc.spec.ports, [{ name: "rpc", port: 9944, targetPort: 9944, protocol: "TCP" }]);
    assert.deepEqual(svc.spec.selector, { "app.kubernetes.io/instance": NAME });
    const sts = stub.get("StatefulSet", NAME);
    assert.equal(sts.spec.replicas, 1);
    const pod = sts.spec.template.spec;
    assert.deepEqual(pod.nodeSelector, { "topology.kubernetes.io/region": "eu-west-1" });
    const c = pod.containers[0];
    assert.equal(c.image, "parity/polkadot:v1.17.1");
    const args: string[] = c.args;
    assert.deepEqual(args.slice(args.indexOf("--rpc-methods"), args.indexOf("--rpc-methods") + 2), [
      "--rpc-methods",
      "Unsafe",
    ]);
    for (const a of ["--validator", "--rpc-external", "--chain=polkadot", "--base-path", "/data"])
      assert.ok(args.includes(a), a);
    assert.deepEqual(args.slice(args.indexOf("--node-key-file"), args.indexOf("--node-key-file") + 2), [
      "--node-key-file",
      "/secrets/node-key",
    ]);
    assert.deepEqual(pod.volumes, [
      { name: "data", persistentVolumeClaim: { claimName: `${NAME}-data` } },
      { name: "keys", secret: { secretName: `${NAME}-keys`, defaultMode: 0o440 } },
      { name: "tmp", emptyDir: { sizeLimit: "256Mi" } },
    ]);
    // A tenant's node: no API token, no privilege, non-root, bounded resources.
    assert.equal(pod.automountServiceAccountToken, false);
    assert.equal(pod.enableServiceLinks, false);
    assert.deepEqual(pod.securityContext, {
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      fsGroupChangePolicy: "OnRootMismatch",
      seccompProfile: { type: "RuntimeDefault" },
    });
    assert.deepEqual(c.securityContext, {
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
    // VALIDATOR sizing: 4 cores / 16Gi requested; memory capped there, CPU at twice the request.
    assert.deepEqual(c.resources, {
      requests: { cpu: "4", memory: "16Gi" },
      limits: { cpu: "8", memory: "16Gi" },
    });
    assert.equal(sts.metadata.labels["rpc-gateway/node-id"], NODE_ID);
  });

  it("provision again (retry) is idempotent: keeps Secret / PVC / Service, replaces the StatefulSet", async () => {
    await provider.provision(spec(), {}, async () => undefined);
    const secretBefore = stub.get("Secret", `${NAME}-keys`);
    stub.calls.length = 0;
    await provider.provision(spec(), {}, async () => undefined);
    assert.deepEqual(stub.methods(), [
      "readNamespacedSecret",
      "readNamespacedPersistentVolumeClaim",
      "readNamespacedService",
      "readNamespacedStatefulSet",
      "replaceNamespacedStatefulSet",
    ]);
    assert.deepEqual(stub.get("Secret", `${NAME}-keys`), secretBefore, "the node key is never regenerated");
    assert.equal(stub.calls.at(-1)!.params.body.metadata.resourceVersion, "7");
  });

  it("roll to SAFE replaces the pod template (new args, new generation); stop scales to 0; status and logs", async () => {
    await provider.provision(spec(), {}, async () => undefined);
    stub.calls.length = 0;
    await provider.roll(spec({ rpcMethods: RpcMethods.SAFE, generation: 2 }), {}, async () => undefined);
    assert.deepEqual(stub.methods().slice(-2), ["readNamespacedStatefulSet", "replaceNamespacedStatefulSet"]);
    const sts = stub.get("StatefulSet", NAME);
    const args: string[] = sts.spec.template.spec.containers[0].args;
    assert.equal(args[args.indexOf("--rpc-methods") + 1], "Safe");
    assert.equal(sts.spec.template.metadata.annotations["rpc-gateway/generation"], "2");

    assert.deepEqual(await provider.status(spec(), {}), { running: false });
    stub.readyReplicas = 1;
    assert.deepEqual(await provider.status(spec(), {}), { running: true });

    await provider.stop(spec(), {});
    assert.equal(stub.get("StatefulSet", NAME).spec.replicas, 0);

    assert.deepEqual(await provider.logs(spec(), {}, 2), ["line 2", "line 3"]);
    const logCall = stub.calls.find((c) => c.method === "readNamespacedPodLog")!;
    assert.deepEqual(logCall.params, {
      name: `${NAME}-0`,
      namespace: "rpc-nodes",
      container: "node",
      tailLines: 2,
    });
  });

  it("delete removes StatefulSet, Service, PVC and Secret; a second delete tolerates 404s", async () => {
    await provider.provision(spec(), {}, async () => undefined);
    stub.calls.length = 0;
    await provider.delete(spec(), {});
    assert.deepEqual(stub.methods(), [
      "deleteNamespacedStatefulSet",
      "deleteNamespacedService",
      "deleteNamespacedPersistentVolumeClaim",
      "deleteNamespacedSecret",
    ]);
    assert.equal(stub.objects.size, 0);
    await provider.delete(spec(), {});
    assert.deepEqual(await provider.status(spec(), {}), { running: false });
  });

  it("over a node's whole life it calls exactly the API methods KUBE_API_PERMISSIONS grants (the Role's source)", async () => {
    await provider.provision(spec(), {}, async () => undefined);
    await provider.provision(spec(), {}, async () => undefined);
    await provider.roll(spec({ generation: 2 }), {}, async () => undefined);
    await provider.status(spec(), {});
    await provider.logs(spec(), {}, 10);
    await provider.stop(spec(), {});
    await provider.delete(spec(), {});
    assert.deepEqual([...new Set(stub.methods())].sort(), Object.keys(KUBE_API_PERMISSIONS).sort());
  });

  it("lightning restore without a configured snapshot fails; no snapshot -> plain PVC", async () => {
    const p2 = new KubernetesProvider(stub.api(), { namespace: "rpc-nodes" });
    await assert.rejects(
      p2.provision(spec(), {}, async () => undefined),
      /no VolumeSnapshot configured/,
    );
    const pvc = p2.pvcManifest(spec({ lightningRestore: false }));
    assert.equal(pvc.spec?.dataSource, undefined);
  });

  it("EVM: geth args; SAFE exposes only eth,net,web3; resources from the sizing table", async () => {
    const img = findImage("EVM")!;
    const s = spec({
      protocol: "EVM",
      nodeType: NodeType.ARCHIVE,
      image: img.image,
      rpcPort: img.rpcPort,
      rpcMethods: RpcMethods.SAFE,
      lightningRestore: false,
      extraArgs: [],
    });
    const args = provider.containerArgs(s);
    assert.equal(args[args.indexOf("--http.api") + 1], "eth,net,web3");
    assert.ok(args.includes("--gcmode"));
    assert.deepEqual(await provider.resources(s, {}), { cpu: 4, memory: 16 * 2 ** 30, storage: 2 * 2 ** 40 });
    assert.equal(parseQuantity("500m"), 0.5);
  });
});
