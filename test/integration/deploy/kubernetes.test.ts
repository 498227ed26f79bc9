import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { load, loadAll } from "js-yaml";
import { loadConfig } from "../../../control-plane/src/config";
import { loadNodeConfig } from "../../../control-plane/src/nodes/node.config";
import {
  KUBE_API_PERMISSIONS,
  type KubeApi,
  KubernetesProvider,
  NODE_P2P_PORTS,
} from "../../../control-plane/src/nodes/providers/kubernetes";
import type { NodeSpec } from "../../../control-plane/src/nodes/providers/provider";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { shutdownBudgetMs } from "../../../data-plane/src/data-plane";

/**
 * deploy/kubernetes, rendered with `kubectl kustomize` (offline: it never contacts a cluster) and checked
 * object by object: the Kubernetes schemas (kubernetes-models' validators, plus a round trip through
 * @kubernetes/client-node's typed models that drops, and so reveals, every field Kubernetes does not know),
 * then the properties the deployment promises. A second group breaks each property in a copy of the
 * rendered objects and expects the checks to say so.
 */

const root = path.resolve(__dirname, "../../../..");
const BASE = path.join(root, "deploy/kubernetes/base");
const PRODUCTION = path.join(root, "deploy/kubernetes/overlays/production");

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are untyped JSON
type K8sObject = Record<string, any>;
type Model = new (data: K8sObject) => { validate(): void };

/** The gateway's namespace, the component labels of its pods and the processes' entry points. */
const GATEWAY_NS = "rpc-gateway";
const COMPONENTS = ["data-plane", "control-plane", "worker", "migrate"] as const;
type Component = (typeof COMPONENTS)[number];
/** Which Secret-fed variables each component may receive. */
const SECRET_VARS: Record<Component, string[]> = {
  "data-plane": ["REDIS_URL"],
  "control-plane": ["DATABASE_URL", "REDIS_URL", "ADMIN_TOKEN", "KEY_ENCRYPTION_SECRET"],
  worker: ["DATABASE_URL", "REDIS_URL", "KEY_ENCRYPTION_SECRET"],
  migrate: ["DATABASE_URL"],
};
const SENSITIVE = ["DATABASE_URL", "REDIS_URL", "ADMIN_TOKEN", "KEY_ENCRYPTION_SECRET"];

function render(dir: string): K8sObject[] {
  const r = spawnSync("kubectl", ["kustomize", dir], {
    // No kubeconfig at all: rendering is local, and nothing here may reach a cluster.
    env: { PATH: process.env.PATH, HOME: process.env.HOME, KUBECONFIG: "/dev/null" },
    encoding: "utf8",
  });
  assert.equal(r.status, 0, `kubectl kustomize ${dir}: ${r.stderr}`);
  const docs = loadAll(r.stdout).filter((d) => d !== null) as K8sObject[];
  assert.ok(docs.length > 0, "nothing rendered");
  return docs;
}

interface Validators {
  models: Map<string, Model | undefined>;
  /** @kubernetes/client-node: YAML through its typed models and back (unknown kinds pass unchanged). */
  roundTrip(obj: K8sObject): K8sObject;
}

async function loadValidators(objs: K8sObject[]): Promise<Validators> {
  const models = new Map<string, Model | undefined>();
  for (const o of objs) {
    const id = `${o.apiVersion}/${o.kind}`;
    if (models.has(id) || String(o.apiVersion).startsWith("monitoring.coreos.com/")) continue;
    // e.g. kubernetes-models/apps/v1 exports Deployment; kubernetes-models/v1 exports Service.
    const mod = (await import(`kubernetes-models/${o.apiVersion}`).catch(() => ({}))) as Record<
      string,
      Model
    >;
    models.set(id, mod[o.kind]);
  }
  const k8s = await import("@kubernetes/client-node");
  return {
    models,
    roundTrip: (obj) => load(k8s.dumpYaml(k8s.loadYaml(JSON.stringify(obj)))) as K8sObject,
  };
}

// ---------------------------------------------------------------------------------------------------
// Helpers over the rendered objects.

function find(objs: K8sObject[], kind: string, name: string, ns = GATEWAY_NS): K8sObject {
  const o = objs.find((x) => x.kind === kind && x.metadata?.name === name && x.metadata?.namespace === ns);
  assert.ok(o, `no ${kind} ${ns}/${name}`);
  return o;
}

/** Kubernetes label-selector semantics (matchLabels AND matchExpressions); an empty selector matches all. */
function selects(selector: K8sObject | undefined, labels: Record<string, string> = {}): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const ok =
      e.operator === "Exists"
        ? has
        : e.operator === "DoesNotExist"
          ? !has
          : e.operator === "In"
            ? has && e.values.includes(labels[e.key])
            : e.operator === "NotIn"
              ? !has || !e.values.includes(labels[e.key])
              : false;
    if (!ok) return false;
  }
  return true;
}

interface Workload {
  component: Component;
  object: K8sObject;
  pod: K8sObject;
  labels: Record<string, string>;
}

function workloads(objs: K8sObject[]): Workload[] {
  return objs
    .filter((o) => o.kind === "Deployment" || o.kind === "Job")
    .map((o) => {
      const labels = o.spec?.template?.metadata?.labels ?? {};
      const component = labels["app.kubernetes.io/component"];
      assert.ok(
        COMPONENTS.includes(component),
        `${o.kind} ${o.metadata.name}: unknown component ${component}`,
      );
      return { component, object: o, pod: o.spec.template.spec, labels };
    });
}

function workload(objs: K8sObject[], component: Component): Workload {
  const w = workloads(objs).filter((x) => x.component === component);
  assert.equal(w.length, 1, `expected one ${component} workload, found ${w.length}`);
  return w[0]!;
}

function containers(pod: K8sObject): K8sObject[] {
  return [...(pod.initContainers ?? []), ...(pod.containers ?? [])];
}

/**
 * A container's environment as the process sees it: ConfigMaps (envFrom and configMapKeyRef) resolved from
 * the rendered objects; variables fed from Secrets are listed apart, with their values left out.
 */
function resolveEnv(objs: K8sObject[], ns: string, c: K8sObject) {
  const env: Record<string, string> = {};
  const fromSecrets = new Set<string>();
  const configMap = (name: string) => find(objs, "ConfigMap", name, ns).data ?? {};
  for (const src of c.envFrom ?? []) {
    assert.ok(!src.secretRef, `container ${c.name}: envFrom a whole Secret (name each key instead)`);
    if (src.configMapRef) Object.assign(env, configMap(src.configMapRef.name));
  }
  for (const e of c.env ?? []) {
    if (e.valueFrom?.secretKeyRef) {
      fromSecrets.add(e.name);
      delete env[e.name];
    } else if (e.valueFrom?.configMapKeyRef) {
      env[e.name] = configMap(e.valueFrom.configMapKeyRef.name)[e.valueFrom.configMapKeyRef.key];
    } else if (e.value !== undefined) {
      env[e.name] = String(e.value);
    }
  }
  return { env, fromSecrets };
}

/** Seconds the preStop hook holds the container before SIGTERM (exec `sleep N` or the sleep action). */
function preStopSeconds(c: K8sObject): number {
  const pre = c.lifecycle?.preStop;
  if (!pre) return 0;
  if (pre.sleep) return Number(pre.sleep.seconds);
  const cmd: string[] = pre.exec?.command ?? [];
  assert.ok(cmd[0] === "sleep" && cmd.length === 2, `preStop of ${c.name} is not a plain sleep: ${cmd}`);
  return Number(cmd[1]);
}

/** cpu in cores, memory in bytes (enough of the quantity syntax for resources). */
function quantity(q: string | number): number {
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G)?$/.exec(String(q));
  assert.ok(m, `not a quantity: ${q}`);
  const mult: Record<string, number> = {
    m: 1e-3,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
  };
  return Number(m[1]) * (m[2] ? mult[m[2]]! : 1);
}

// ---------------------------------------------------------------------------------------------------
// The checks. Each throws an AssertionError naming what is wrong.

function checkSchemas(objs: K8sObject[], v: Validators): void {
  for (const o of objs) {
    const id = `${o.apiVersion}/${o.kind} ${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
    if (String(o.apiVersion).startsWith("monitoring.coreos.com/")) continue; // a CRD: checkServiceMonitor
    const Model = v.models.get(`${o.apiVersion}/${o.kind}`);
    assert.ok(Model, `${id}: not a Kubernetes type kubernetes-models knows`);
    assert.doesNotThrow(() => new Model(o).validate(), `${id}: fails the Kubernetes schema`);
    const back = v.roundTrip(o);
    assert.ok(
      isDeepStrictEqual(back, o),
      `${id}: has fields Kubernetes does not know:\n${JSON.stringify(o)}`,
    );
  }
}

function checkDataPlaneScaling(objs: K8sObject[]): void {
  const dp = workload(objs, "data-plane");
  assert.equal(dp.object.kind, "Deployment");
  const others = workloads(objs).filter((w) => w.component !== "data-plane");
  const hpa = find(objs, "HorizontalPodAutoscaler", "data-plane");
  assert.deepEqual(
    hpa.spec.scaleTargetRef,
    { apiVersion: "apps/v1", kind: "Deployment", name: dp.object.metadata.name },
    "the HPA does not scale the data-plane Deployment",
  );
  assert.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas >= hpa.spec.minReplicas, "HPA replica range");
  assert.ok(hpa.spec.metrics?.length > 0, "HPA without a metric");
  assert.equal(dp.object.spec.replicas, undefined, "replicas set on a Deployment the HPA owns");
  const pdb = find(objs, "PodDisruptionBudget", "data-plane");
  assert.ok(selects(pdb.spec.selector, dp.labels), "the PDB does not select the data-plane pods");
  for (const o of others)
    assert.ok(!selects(pdb.spec.selector, o.labels), `the PDB selects ${o.component} pods`);
  const minAvailable = pdb.spec.minAvailable;
  assert.ok(
    (typeof minAvailable === "number" && minAvailable >= 1 && minAvailable < hpa.spec.minReplicas) ||
      pdb.spec.maxUnavailable !== undefined,
    "the PDB must keep a pod up and still let a node drain (minAvailable < minReplicas)",
  );
  const svc = find(objs, "Service", "data-plane");
  assert.ok(
    selects({ matchLabels: svc.spec.selector }, dp.labels),
    "the Service does not select the data plane",
  );
  for (const o of others)
    assert.ok(!selects({ matchLabels: svc.spec.selector }, o.labels), `Service selects ${o.component}`);
  const portNames = new Set(
    dp.pod.containers.flatMap((c: K8sObject) => (c.ports ?? []).map((p: K8sObject) => p.name)),
  );
  for (const p of svc.spec.ports)
    assert.ok(portNames.has(p.targetPort), `Service targetPort ${p.targetPort} not a container port`);
}

function checkProbes(objs: K8sObject[]): void {
  const dp = workload(objs, "data-plane").pod.containers[0];
  assert.equal(dp.livenessProbe?.httpGet?.path, "/healthz", "data-plane liveness probe is not GET /healthz");
  assert.equal(dp.readinessProbe?.httpGet?.path, "/readyz", "data-plane readiness probe is not GET /readyz");
  const cp = workload(objs, "control-plane").pod.containers[0];
  assert.equal(
    cp.livenessProbe?.httpGet?.path,
    "/healthz",
    "control-plane liveness probe is not GET /healthz",
  );
  assert.equal(
    cp.readinessProbe?.httpGet?.path,
    "/readyz",
    "control-plane readiness probe is not GET /readyz",
  );
  for (const c of [dp, cp]) {
    const ports = new Set((c.ports ?? []).flatMap((p: K8sObject) => [p.name, p.containerPort]));
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe].filter(Boolean)) {
      assert.ok(
        ports.has(probe.httpGet.port),
        `${c.name}: probe port ${probe.httpGet.port} is not a container port`,
      );
    }
  }
}

function checkPodSecurity(objs: K8sObject[]): void {
  for (const w of workloads(objs)) {
    const psc = w.pod.securityContext ?? {};
    assert.equal(psc.runAsNonRoot, true, `${w.component}: pod without runAsNonRoot`);
    assert.ok(
      Number.isInteger(psc.runAsUser) && psc.runAsUser > 0,
      `${w.component}: runAsUser must be a non-root uid`,
    );
    assert.equal(w.pod.hostNetwork ?? false, false, `${w.component}: hostNetwork`);
    const emptyDirs = new Set(
      (w.pod.volumes ?? []).filter((v: K8sObject) => v.emptyDir).map((v: K8sObject) => v.name),
    );
    for (const c of containers(w.pod)) {
      const sc = c.securityContext ?? {};
      const where = `${w.component}/${c.name}`;
      assert.equal(sc.runAsNonRoot ?? psc.runAsNonRoot, true, `${where}: runAsNonRoot`);
      assert.equal(sc.readOnlyRootFilesystem, true, `${where}: root filesystem not read-only`);
      assert.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
      assert.ok(sc.capabilities?.drop?.includes("ALL"), `${where}: capabilities not dropped`);
      assert.notEqual(sc.privileged, true, `${where}: privileged`);
      // Writable paths are emptyDirs only; anything else mounted is read-only.
      for (const m of c.volumeMounts ?? []) {
        assert.ok(
          emptyDirs.has(m.name) || m.readOnly === true,
          `${where}: writable mount ${m.mountPath} not an emptyDir`,
        );
      }
      assert.ok(
        (c.volumeMounts ?? []).some((m: K8sObject) => m.mountPath === "/tmp" && emptyDirs.has(m.name)),
        `${where}: no writable /tmp`,
      );
      for (const kind of ["requests", "limits"]) {
        for (const r of ["cpu", "memory"]) {
          assert.ok(c.resources?.[kind]?.[r] !== undefined, `${where}: resources.${kind}.${r} not set`);
        }
      }
      for (const r of ["cpu", "memory"]) {
        assert.ok(
          quantity(c.resources.limits[r]) >= quantity(c.resources.requests[r]),
          `${where}: ${r} limit below its request`,
        );
      }
    }
  }
}

function checkTermination(objs: K8sObject[]): void {
  const dp = workload(objs, "data-plane");
  const c = dp.pod.containers[0];
  const { env } = resolveEnv(objs, GATEWAY_NS, c);
  // The budget of this very configuration (ConfigMap + env over the defaults), not just of the defaults.
  const budgetMs = shutdownBudgetMs(loadDataPlaneConfig(env));
  const graceMs = (dp.pod.terminationGracePeriodSeconds ?? 30) * 1000;
  const preStopMs = preStopSeconds(c) * 1000;
  assert.ok(
    preStopMs >= 1000,
    "data plane without a preStop pause (new connections would hit a draining pod)",
  );
  assert.ok(
    graceMs >= preStopMs + budgetMs,
    `data plane: terminationGracePeriodSeconds ${graceMs / 1000} s < preStop ${preStopMs / 1000} s + shutdown budget ${budgetMs / 1000} s`,
  );
  for (const component of ["control-plane", "worker"] as const) {
    const w = workload(objs, component);
    const grace = w.pod.terminationGracePeriodSeconds ?? 30;
    assert.ok(
      grace >= preStopSeconds(w.pod.containers[0]) + 10,
      `${component}: grace period leaves <10 s to close`,
    );
  }
}

function checkSecretsAndConfig(objs: K8sObject[]): void {
  assert.ok(
    !objs.some((o) => o.kind === "Secret"),
    "a Secret is rendered: Secrets are referenced, created by the operator",
  );
  for (const cm of objs.filter((o) => o.kind === "ConfigMap")) {
    for (const k of SENSITIVE) assert.ok(!(k in (cm.data ?? {})), `ConfigMap ${cm.metadata.name} holds ${k}`);
  }
  const images = new Set<string>();
  for (const w of workloads(objs)) {
    for (const c of containers(w.pod)) {
      images.add(c.image);
      const { env, fromSecrets } = resolveEnv(objs, w.object.metadata.namespace, c);
      for (const k of SENSITIVE) {
        assert.ok(!(k in env), `${w.component}: ${k} given as plain configuration, not from a Secret`);
        assert.equal(
          fromSecrets.has(k),
          SECRET_VARS[w.component].includes(k),
          `${w.component}: ${k} ${fromSecrets.has(k) ? "given" : "missing"}`,
        );
      }
      for (const s of fromSecrets)
        assert.ok(SECRET_VARS[w.component].includes(s), `${w.component}: secret ${s}`);
      for (const v of w.pod.volumes ?? [])
        assert.ok(!v.secret && !v.projected, `${w.component}: secret volume`);
      // The command runs a file the build produces.
      const script = (c.command ?? []).find((a: string) => a.startsWith("dist/"));
      assert.ok(
        script && existsSync(path.join(root, script)),
        `${w.component}: command ${c.command} runs no built file`,
      );
      if (w.component === "migrate") continue;
      assert.equal(env.NODE_ENV, "production", `${w.component}: NODE_ENV is not production`);
      // The processes accept this configuration (secrets stood in by well-formed values).
      const stand = {
        ...env,
        DATABASE_URL: "postgres://u@db.invalid/x",
        REDIS_URL: "redis://redis.invalid:6379",
        ADMIN_TOKEN: "x".repeat(32),
        KEY_ENCRYPTION_SECRET: "y".repeat(32),
      };
      if (w.component === "data-plane") loadDataPlaneConfig(stand);
      if (w.component === "control-plane") loadConfig(stand);
      if (w.component === "worker") loadConfig(stand, { worker: true });
    }
  }
  assert.equal(images.size, 1, `one image for every process, found ${[...images]}`);
  assert.equal(workload(objs, "migrate").object.kind, "Job", "migrations are not a Job");
}

function checkWorkerAndNodes(objs: K8sObject[]): void {
  const w = workload(objs, "worker");
  const { env } = resolveEnv(objs, GATEWAY_NS, w.pod.containers[0]);
  const nodeCfg = loadNodeConfig(env);
  assert.equal(
    nodeCfg.provider,
    "kubernetes",
    "the worker must run dedicated nodes on Kubernetes (NODE_PROVIDER)",
  );
  const nodesNs = nodeCfg.k8sNamespace;
  // RBAC: what the provider calls, in the nodes' namespace, bound to the worker's service account.
  const sa = w.pod.serviceAccountName;
  assert.ok(sa, "worker without its own service account");
  find(objs, "ServiceAccount", sa);
  const binding = objs.find(
    (o) =>
      o.kind === "RoleBinding" &&
      o.metadata.namespace === nodesNs &&
      o.subjects?.some(
        (s: K8sObject) => s.kind === "ServiceAccount" && s.name === sa && s.namespace === GATEWAY_NS,
      ),
  );
  assert.ok(binding, `no RoleBinding in ${nodesNs} for the worker's service account`);
  assert.equal(binding.roleRef.kind, "Role", "the worker's permissions must be a namespaced Role");
  const role = find(objs, "Role", binding.roleRef.name, nodesNs);
  // Exactly what the provider's calls need (KUBE_API_PERMISSIONS), in one Role: no wildcard, nothing more.
  const granted = new Set<string>();
  for (const r of role.rules) {
    for (const k of ["resourceNames", "nonResourceURLs"])
      assert.ok(r[k] === undefined, `Role rule with ${k}: ${JSON.stringify(r)}`);
    for (const g of r.apiGroups)
      for (const res of r.resources) for (const v of r.verbs) granted.add(`${g}|${res}|${v}`);
  }
  const needed = new Set(
    Object.values(KUBE_API_PERMISSIONS).map((p) => `${p.apiGroup}|${p.resource}|${p.verb}`),
  );
  for (const g of granted)
    assert.ok(needed.has(g), `the worker's Role grants ${g}, which no provider call needs`);
  for (const n of needed) assert.ok(granted.has(n), `the worker's Role lacks ${n}, which the provider calls`);
  const grants = objs.filter((o) =>
    ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"].includes(o.kind),
  );
  assert.deepEqual(
    grants.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
    [`Role/${role.metadata.name}`, `RoleBinding/${binding.metadata.name}`].sort(),
    "one Role and its binding, nothing cluster-wide",
  );
  for (const other of ["data-plane", "control-plane", "migrate"] as const) {
    assert.notEqual(
      workload(objs, other).pod.automountServiceAccountToken,
      true,
      `${other} mounts an API token`,
    );
  }

  // The NetworkPolicy, against the labels the provider really puts on a node's pods.
  const provider = new KubernetesProvider({} as KubeApi, { namespace: nodesNs });
  const nodeLabels = provider.labels({
    nodeId: "00000000-0000-4000-8000-000000000001",
    workspaceId: "w",
  } as NodeSpec);
  const nodePod = provider.statefulSetManifest({
    nodeId: "00000000-0000-4000-8000-000000000001",
    workspaceId: "w",
    protocol: "EVM",
    nodeType: "FULL",
    rpcMethods: "SAFE",
    extraArgs: [],
    image: "i",
    rpcPort: 8545,
    region: "r",
    generation: 1,
  } as unknown as NodeSpec).spec!.template.metadata!.labels!;
  assert.deepEqual(nodePod, nodeLabels);
  // Ingress: the policies that restrict it (the egress one is checked by checkNodeEgress).
  const policies = objs.filter(
    (o) =>
      o.kind === "NetworkPolicy" &&
      o.metadata.namespace === nodesNs &&
      selects(o.spec.podSelector, nodePod) &&
      o.spec.policyTypes?.includes("Ingress"),
  );
  assert.ok(policies.length > 0, `no NetworkPolicy in ${nodesNs} selects dedicated-node pods`);
  const gatewayNsLabels = { "kubernetes.io/metadata.name": GATEWAY_NS };
  const allowedPeers: Component[] = ["data-plane", "worker"];
  let dataPlaneAllowed = false;
  for (const p of policies) {
    assert.ok(p.spec.policyTypes?.includes("Ingress"), `${p.metadata.name}: Ingress not restricted`);
    for (const rule of p.spec.ingress ?? []) {
      assert.ok(
        rule.from?.length > 0,
        `${p.metadata.name}: an ingress rule without \`from\` admits everyone`,
      );
      for (const peer of rule.from) {
        assert.ok(!peer.ipBlock, `${p.metadata.name}: ipBlock peer`);
        assert.ok(
          peer.namespaceSelector && peer.podSelector,
          `${p.metadata.name}: peer must name namespace and pods`,
        );
        assert.ok(
          selects(peer.namespaceSelector, gatewayNsLabels),
          `${p.metadata.name}: peer outside ${GATEWAY_NS}`,
        );
        // A peer in the nodes' namespace would let one tenant's node call another's.
        assert.ok(
          !selects(peer.namespaceSelector, { "kubernetes.io/metadata.name": nodesNs }),
          `${p.metadata.name}: a peer selects the nodes' namespace`,
        );
        for (const wl of workloads(objs)) {
          if (selects(peer.podSelector, wl.labels)) {
            assert.ok(allowedPeers.includes(wl.component), `${p.metadata.name}: admits ${wl.component} pods`);
            if (wl.component === "data-plane") dataPlaneAllowed = true;
          }
        }
        assert.ok(
          workloads(objs).some((wl) => selects(peer.podSelector, wl.labels)),
          `${p.metadata.name}: a peer that selects none of the gateway's pods (or any pod)`,
        );
      }
    }
  }
  assert.ok(dataPlaneAllowed, "the data plane cannot reach dedicated nodes");
  checkNodeEgress(objs, nodesNs, nodePod);
  // Admission refuses a node pod without the securityContext checkNodePod expects, whatever builds it.
  const ns = objs.find((o) => o.kind === "Namespace" && o.metadata.name === nodesNs);
  assert.equal(
    ns?.metadata.labels?.["pod-security.kubernetes.io/enforce"],
    "restricted",
    `${nodesNs} does not enforce the restricted Pod Security Standard`,
  );
}

/** CIDR -> [first address, last address] as bigints (IPv4 in 32 bits, IPv6 in 128). */
function cidrRange(cidr: string): { v6: boolean; first: bigint; last: bigint } {
  const [addr, len] = cidr.split("/");
  const v6 = addr!.includes(":");
  const bits = v6 ? 128 : 32;
  let n = 0n;
  if (v6) {
    const [head, tail] = addr!.split("::") as [string, string | undefined];
    const h = head === "" ? [] : head.split(":");
    const t = tail === undefined || tail === "" ? [] : tail.split(":");
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
    for (const g of groups) n = (n << 16n) | BigInt(Number.parseInt(g, 16));
  } else {
    for (const o of addr!.split(".")) n = (n << 8n) | BigInt(Number(o));
  }
  const host = BigInt(bits - Number(len ?? bits));
  const first = (n >> host) << host;
  return { v6, first, last: first + (1n << host) - 1n };
}

/** Whether `inner` lies inside one of `outer`. */
function coveredBy(inner: string, outer: string[]): boolean {
  const i = cidrRange(inner);
  return outer.some((o) => {
    const r = cidrRange(o);
    return r.v6 === i.v6 && r.first <= i.first && i.last <= r.last;
  });
}

/** Ranges no dedicated node may reach: private, CGNAT, link-local (cloud metadata), loopback. */
const CLUSTER_RANGES = [
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "169.254.0.0/16",
  "127.0.0.0/8",
  "fc00::/7",
  "fe80::/10",
  "::1/128",
];

function checkNodeEgress(objs: K8sObject[], nodesNs: string, nodePod: Record<string, string>): void {
  const policies = objs.filter(
    (o) =>
      o.kind === "NetworkPolicy" &&
      o.metadata.namespace === nodesNs &&
      selects(o.spec.podSelector, nodePod) &&
      o.spec.policyTypes?.includes("Egress"),
  );
  assert.ok(policies.length > 0, `no egress NetworkPolicy in ${nodesNs} selects dedicated-node pods`);
  const p2p = new Set(
    Object.values(NODE_P2P_PORTS)
      .flat()
      .map((p) => `${p.protocol}/${p.port}`),
  );
  const opened = new Set<string>();
  let dns = false;
  for (const p of policies) {
    for (const rule of p.spec.egress ?? []) {
      assert.ok(rule.to?.length > 0, `${p.metadata.name}: an egress rule without \`to\` reaches everything`);
      assert.ok(rule.ports?.length > 0, `${p.metadata.name}: an egress rule without ports opens every port`);
      const ports = rule.ports.map((x: K8sObject) => `${x.protocol ?? "TCP"}/${x.port}`);
      for (const peer of rule.to) {
        if (peer.ipBlock) {
          // A public range minus every range of the cluster and its networks, to the p2p ports only.
          for (const range of CLUSTER_RANGES) {
            if (cidrRange(range).v6 !== cidrRange(peer.ipBlock.cidr).v6) continue;
            if (!coveredBy(range, [peer.ipBlock.cidr])) continue;
            assert.ok(
              coveredBy(range, peer.ipBlock.except ?? []),
              `${p.metadata.name}: ${peer.ipBlock.cidr} lets nodes reach ${range}`,
            );
          }
          for (const port of ports)
            assert.ok(p2p.has(port), `${p.metadata.name}: egress to ${port}, not a peer-to-peer port`);
          for (const port of ports) opened.add(port);
        } else {
          // Only the cluster's resolver, on port 53.
          assert.ok(
            selects(peer.namespaceSelector, { "kubernetes.io/metadata.name": "kube-system" }) &&
              !selects(peer.namespaceSelector, { "kubernetes.io/metadata.name": nodesNs }) &&
              !selects(peer.namespaceSelector, { "kubernetes.io/metadata.name": GATEWAY_NS }) &&
              selects(peer.podSelector, { "k8s-app": "kube-dns" }) &&
              !selects(peer.podSelector, {}),
            `${p.metadata.name}: an egress peer inside the cluster other than DNS`,
          );
          assert.deepEqual([...ports].sort(), ["TCP/53", "UDP/53"], `${p.metadata.name}: DNS ports`);
          dns = true;
        }
      }
    }
  }
  assert.ok(dns, "dedicated nodes cannot resolve names (no DNS egress)");
  for (const port of p2p) assert.ok(opened.has(port), `dedicated nodes cannot reach peers on ${port}`);
}

/** The dedicated-node pod as the Kubernetes provider builds it, checked like the gateway's own pods. */
function checkNodePod(v: Validators): void {
  const provider = new KubernetesProvider({} as KubeApi, { namespace: "rpc-gateway-nodes" });
  for (const [protocol, nodeType] of [
    ["EVM", "FULL"],
    ["SUBSTRATE", "VALIDATOR"],
  ] as const) {
    const sts = provider.statefulSetManifest({
      nodeId: "00000000-0000-4000-8000-000000000002",
      workspaceId: "w",
      protocol,
      nodeType,
      rpcMethods: "SAFE",
      extraArgs: [],
      image: "i",
      rpcPort: 9944,
      region: "r",
      generation: 1,
    } as unknown as NodeSpec) as K8sObject;
    const where = `dedicated ${protocol} node`;
    const Model = v.models.get("apps/v1/StatefulSet");
    assert.ok(Model, "kubernetes-models has no apps/v1 StatefulSet");
    assert.doesNotThrow(() => new Model(sts).validate(), `${where}: fails the Kubernetes schema`);
    assert.ok(isDeepStrictEqual(v.roundTrip(sts), sts), `${where}: has fields Kubernetes does not know`);
    const pod = sts.spec.template.spec;
    assert.equal(pod.automountServiceAccountToken, false, `${where}: mounts a service-account token`);
    const psc = pod.securityContext ?? {};
    assert.equal(psc.runAsNonRoot, true, `${where}: pod without runAsNonRoot`);
    assert.ok(Number.isInteger(psc.runAsUser) && psc.runAsUser > 0, `${where}: runAsUser must be non-root`);
    assert.equal(psc.seccompProfile?.type, "RuntimeDefault", `${where}: seccompProfile`);
    assert.equal(pod.hostNetwork ?? false, false, `${where}: hostNetwork`);
    for (const c of containers(pod)) {
      const sc = c.securityContext ?? {};
      assert.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
      assert.deepEqual(sc.capabilities?.drop, ["ALL"], `${where}: capabilities not dropped`);
      assert.notEqual(sc.privileged, true, `${where}: privileged`);
      for (const r of ["cpu", "memory"]) {
        assert.ok(c.resources?.limits?.[r] !== undefined, `${where}: resources.limits.${r} not set`);
        assert.ok(
          quantity(c.resources.limits[r]) >= quantity(c.resources.requests[r]),
          `${where}: ${r} limit below its request`,
        );
      }
    }
  }
}

/** Every trusted proxy entry is a handful of addresses (the ingress controller's), never a pod range. */
function checkTrustedProxies(objs: K8sObject[]): void {
  for (const w of workloads(objs)) {
    if (w.component !== "data-plane" && w.component !== "control-plane") continue;
    const { env } = resolveEnv(objs, GATEWAY_NS, w.pod.containers[0]);
    for (const entry of (env.TRUSTED_PROXIES ?? "")
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean)) {
      const cidr = entry.includes("/") ? entry : `${entry}/${entry.includes(":") ? 128 : 32}`;
      const r = cidrRange(cidr);
      assert.ok(
        r.last - r.first < 256n,
        `${w.component}: TRUSTED_PROXIES ${entry} trusts ${r.last - r.first + 1n} addresses (the ingress controller's only)`,
      );
    }
  }
}

/** Secrets stood in by well-formed values, for parsing a process's configuration. */
const STAND_IN_SECRETS = {
  DATABASE_URL: "postgres://u@db.invalid/x",
  REDIS_URL: "redis://redis.invalid:6379",
  ADMIN_TOKEN: "x".repeat(32),
  KEY_ENCRYPTION_SECRET: "y".repeat(32),
};

/**
 * Each process's /metrics listener as its own configuration parses it (port, host variable), and the
 * Service carrying its API, if it has one, which must not expose the metrics port.
 */
const SCRAPED: {
  component: "data-plane" | "control-plane" | "worker";
  port: (env: Record<string, string>) => number;
  hostVar: string;
  publicService?: string;
}[] = [
  {
    component: "data-plane",
    port: (env) => loadDataPlaneConfig(env).METRICS_PORT,
    hostVar: "METRICS_HOST",
    publicService: "data-plane",
  },
  {
    component: "control-plane",
    port: (env) => loadConfig({ ...env, ...STAND_IN_SECRETS }).controlPlaneMetrics.port,
    hostVar: "CONTROL_PLANE_METRICS_HOST",
    publicService: "control-plane",
  },
  {
    component: "worker",
    port: (env) => loadConfig({ ...env, ...STAND_IN_SECRETS }, { worker: true }).workerMetrics.port,
    hostVar: "WORKER_METRICS_HOST",
  },
];

/** One ServiceMonitor per process, each scraping its metrics port through its own `<component>-metrics` Service. */
function checkServiceMonitors(objs: K8sObject[]): void {
  for (const { component, port, hostVar, publicService } of SCRAPED) {
    const sm = find(objs, "ServiceMonitor", component);
    assert.equal(sm.apiVersion, "monitoring.coreos.com/v1");
    const w = workload(objs, component);
    const c = w.pod.containers[0];
    const { env } = resolveEnv(objs, GATEWAY_NS, c);
    // /metrics is on its own port, a container port of its own, reachable from Prometheus (not loopback).
    const metricsPort = port(env);
    const named = (c.ports ?? []).find((p: K8sObject) => p.containerPort === metricsPort);
    assert.ok(named, `${component}: metrics port ${metricsPort} is not a container port`);
    assert.notEqual(
      env[hostVar] ?? "127.0.0.1",
      "127.0.0.1",
      `${component}: metrics bound to loopback in a pod`,
    );
    if (publicService !== undefined) {
      for (const p of find(objs, "Service", publicService).spec.ports)
        assert.ok(
          p.targetPort !== named.name && p.targetPort !== metricsPort,
          `the public ${publicService} Service exposes the metrics port`,
        );
    }
    const scraped = objs.filter(
      (o) =>
        o.kind === "Service" &&
        o.metadata.namespace === GATEWAY_NS &&
        selects(sm.spec.selector, o.metadata.labels),
    );
    assert.deepEqual(
      scraped.map((o) => o.metadata.name),
      [`${component}-metrics`],
      `the ServiceMonitor must select the ${component}-metrics Service only`,
    );
    const svc = scraped[0]!;
    assert.ok(
      selects({ matchLabels: svc.spec.selector }, w.labels),
      `${component}-metrics does not select the ${component}`,
    );
    assert.ok(
      Array.isArray(sm.spec.endpoints) && sm.spec.endpoints.length > 0,
      `ServiceMonitor ${component} without endpoints`,
    );
    const allowed = new Set(["port", "path", "interval", "scrapeTimeout", "scheme"]);
    for (const ep of sm.spec.endpoints) {
      for (const k of Object.keys(ep)) assert.ok(allowed.has(k), `ServiceMonitor endpoint field ${k}`);
      const p = svc.spec.ports.find((x: K8sObject) => x.name === ep.port);
      assert.ok(p, `ServiceMonitor port ${ep.port} not on the Service`);
      assert.ok(
        p.targetPort === named.name || p.targetPort === metricsPort,
        `ServiceMonitor ${component} port ${ep.port} does not reach its metrics port`,
      );
      assert.equal(ep.path, "/metrics");
      assert.match(ep.interval, /^\d+s$/);
    }
    assert.deepEqual(Object.keys(sm.spec).sort(), ["endpoints", "selector"], "ServiceMonitor spec fields");
    const ann = w.object.spec.template.metadata.annotations ?? {};
    assert.equal(
      ann["prometheus.io/port"],
      String(metricsPort),
      `${component}: prometheus.io/port is not its metrics port`,
    );
  }
}

/** The alert rules as a PrometheusRule: the groups of deploy/observability/prometheus/rules.yml, unchanged. */
function checkPrometheusRule(objs: K8sObject[]): void {
  const rule = find(objs, "PrometheusRule", "rpc-gateway");
  assert.equal(rule.apiVersion, "monitoring.coreos.com/v1");
  assert.deepEqual(Object.keys(rule.spec), ["groups"], "PrometheusRule spec fields");
  const shipped = load(
    readFileSync(path.join(root, "deploy/observability/prometheus/rules.yml"), "utf8"),
  ) as K8sObject;
  assert.ok(
    isDeepStrictEqual(rule.spec.groups, shipped.groups),
    "the PrometheusRule's groups differ from deploy/observability/prometheus/rules.yml",
  );
}

function checkAll(objs: K8sObject[], v: Validators): void {
  checkSchemas(objs, v);
  checkDataPlaneScaling(objs);
  checkProbes(objs);
  checkPodSecurity(objs);
  checkTermination(objs);
  checkSecretsAndConfig(objs);
  checkWorkerAndNodes(objs);
  checkNodePod(v);
  checkTrustedProxies(objs);
  checkServiceMonitors(objs);
  checkPrometheusRule(objs);
}

// ---------------------------------------------------------------------------------------------------

describe("deploy/kubernetes (kustomize)", function () {
  this.timeout(30_000);
  let base: K8sObject[];
  let production: K8sObject[];
  let v: Validators;
  before(async () => {
    base = render(BASE);
    production = render(PRODUCTION);
    // Plus the StatefulSet the Kubernetes provider builds for each dedicated node (checkNodePod), and a
    // ClusterRole (a broken case below adds one).
    v = await loadValidators([
      ...base,
      ...production,
      { apiVersion: "apps/v1", kind: "StatefulSet" },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole" },
    ]);
  });

  it("renders base and production with every object the deployment needs", () => {
    for (const objs of [base, production]) {
      const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
      for (const k of [
        "Deployment/data-plane",
        "Service/data-plane",
        "HorizontalPodAutoscaler/data-plane",
        "PodDisruptionBudget/data-plane",
        "Deployment/control-plane",
        "Service/control-plane",
        "Deployment/worker",
        "Job/migrate",
        "ServiceMonitor/data-plane",
        "Service/data-plane-metrics",
        "ServiceMonitor/control-plane",
        "Service/control-plane-metrics",
        "ServiceMonitor/worker",
        "Service/worker-metrics",
        "PrometheusRule/rpc-gateway",
        "NetworkPolicy/dedicated-nodes-ingress",
        "NetworkPolicy/dedicated-nodes-egress",
      ]) {
        assert.ok(kinds.includes(k), `${k} missing`);
      }
      assert.ok(
        objs.some((o) => o.kind === "ConfigMap"),
        "no ConfigMap",
      );
    }
    // The overlay is production: its own image and a larger autoscaling range than the base.
    const img = (objs: K8sObject[]) => workload(objs, "data-plane").pod.containers[0].image;
    assert.match(
      img(production),
      /^[^/]+\/.+:.+$/,
      "production image is not a registry reference with a tag",
    );
    const hpa = (objs: K8sObject[]) => find(objs, "HorizontalPodAutoscaler", "data-plane").spec;
    assert.ok(hpa(production).maxReplicas > hpa(base).maxReplicas);
  });

  for (const [name, pick] of [
    ["base", () => base],
    ["production overlay", () => production],
  ] as const) {
    it(`${name}: every object passes the Kubernetes schemas and the deployment's properties`, () => {
      checkAll(pick(), v);
    });
  }

  describe("each property, broken, is caught", () => {
    const dp = (o: K8sObject[]) => workload(o, "data-plane");
    const cases: [string, (o: K8sObject[]) => void, RegExp][] = [
      [
        "an invalid field type",
        (o) => {
          dp(o).pod.containers[0].ports[0].containerPort = "http";
        },
        /fails the Kubernetes schema/,
      ],
      [
        "an unknown field (typo)",
        (o) => {
          dp(o).pod.containers[0].readinessProbe.httpGet.pat = "/readyz";
        },
        /fields Kubernetes does not know/,
      ],
      [
        "HPA on another Deployment",
        (o) => {
          find(o, "HorizontalPodAutoscaler", "data-plane").spec.scaleTargetRef.name = "worker";
        },
        /HPA does not scale/,
      ],
      [
        "PDB selecting other pods",
        (o) => {
          find(o, "PodDisruptionBudget", "data-plane").spec.selector.matchLabels[
            "app.kubernetes.io/component"
          ] = "worker";
        },
        /PDB does not select/,
      ],
      [
        "readiness on /healthz",
        (o) => {
          dp(o).pod.containers[0].readinessProbe.httpGet.path = "/healthz";
        },
        /readiness probe is not GET \/readyz/,
      ],
      [
        "control-plane readiness that ignores Postgres and Redis",
        (o) => {
          workload(o, "control-plane").pod.containers[0].readinessProbe.httpGet.path = "/healthz";
        },
        /control-plane readiness probe is not GET \/readyz/,
      ],
      [
        "no liveness probe",
        (o) => {
          delete dp(o).pod.containers[0].livenessProbe;
        },
        /liveness probe is not GET \/healthz/,
      ],
      [
        "a writable root filesystem",
        (o) => {
          workload(o, "worker").pod.containers[0].securityContext.readOnlyRootFilesystem = false;
        },
        /root filesystem not read-only/,
      ],
      [
        "running as root",
        (o) => {
          workload(o, "migrate").pod.securityContext.runAsNonRoot = false;
          workload(o, "migrate").pod.containers[0].securityContext.runAsNonRoot = false;
        },
        /runAsNonRoot/,
      ],
      [
        "no memory limit",
        (o) => {
          delete workload(o, "control-plane").pod.containers[0].resources.limits.memory;
        },
        /resources.limits.memory not set/,
      ],
      [
        "a grace period shorter than the drain",
        (o) => {
          dp(o).pod.terminationGracePeriodSeconds = 20;
        },
        /terminationGracePeriodSeconds 20 s < preStop 5 s \+ shutdown budget 18 s/,
      ],
      [
        "a longer drain configured for the data plane",
        (o) => {
          dp(o).pod.containers[0].env.push({ name: "SHUTDOWN_DRAIN_MS", value: "60000" });
        },
        /shutdown budget 68 s/,
      ],
      [
        "ADMIN_TOKEN given to the worker",
        (o) => {
          workload(o, "worker").pod.containers[0].env.push({
            name: "ADMIN_TOKEN",
            valueFrom: { secretKeyRef: { name: "rpc-gateway-control-plane", key: "ADMIN_TOKEN" } },
          });
        },
        /worker: ADMIN_TOKEN given/,
      ],
      [
        "DATABASE_URL given to the data plane",
        (o) => {
          dp(o).pod.containers[0].env.push({
            name: "DATABASE_URL",
            valueFrom: { secretKeyRef: { name: "rpc-gateway-database", key: "DATABASE_URL" } },
          });
        },
        /data-plane: DATABASE_URL given/,
      ],
      [
        "a secret in the ConfigMap",
        (o) => {
          o.find((x) => x.kind === "ConfigMap")!.data.KEY_ENCRYPTION_SECRET = "s";
        },
        /holds KEY_ENCRYPTION_SECRET/,
      ],
      [
        "nodes reachable from any pod of any namespace",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-ingress", "rpc-gateway-nodes").spec.ingress.push({
            from: [{ namespaceSelector: {}, podSelector: {} }],
          });
        },
        /a peer selects the nodes' namespace/,
      ],
      [
        "nodes reachable from every gateway pod",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-ingress", "rpc-gateway-nodes").spec.ingress.push({
            from: [
              {
                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "rpc-gateway" } },
                podSelector: {},
              },
            ],
          });
        },
        /admits control-plane pods/,
      ],
      [
        "nodes reachable from anywhere",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-ingress", "rpc-gateway-nodes").spec.ingress.push({});
        },
        /without `from` admits everyone/,
      ],
      [
        "a policy that misses the node pods",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-ingress", "rpc-gateway-nodes").spec.podSelector = {
            matchLabels: { app: "node" },
          };
        },
        /no NetworkPolicy in rpc-gateway-nodes selects dedicated-node pods/,
      ],
      [
        "a Role that grants more than the provider calls",
        (o) => {
          find(o, "Role", "rpc-gateway-nodes", "rpc-gateway-nodes").rules.push({
            apiGroups: [""],
            resources: ["secrets"],
            verbs: ["list"],
          });
        },
        /grants \|secrets\|list, which no provider call needs/,
      ],
      [
        "a wildcard Role",
        (o) => {
          find(o, "Role", "rpc-gateway-nodes", "rpc-gateway-nodes").rules = [
            { apiGroups: ["*"], resources: ["*"], verbs: ["*"] },
          ];
        },
        /grants \*\|\*\|\*, which no provider call needs/,
      ],
      [
        "a Role that misses a call",
        (o) => {
          find(o, "Role", "rpc-gateway-nodes", "rpc-gateway-nodes").rules[0].verbs = [
            "get",
            "create",
            "delete",
          ];
        },
        /lacks apps\|statefulsets\|update/,
      ],
      [
        "a ClusterRole besides",
        (o) => {
          o.push({
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "ClusterRole",
            metadata: { name: "extra" },
            rules: [],
          });
        },
        /nothing cluster-wide/,
      ],
      [
        "node egress without the private ranges excepted",
        (o) => {
          const rule = find(o, "NetworkPolicy", "dedicated-nodes-egress", "rpc-gateway-nodes").spec.egress[1];
          rule.to[0].ipBlock.except = rule.to[0].ipBlock.except.filter((c: string) => c !== "10.0.0.0/8");
        },
        /0\.0\.0\.0\/0 lets nodes reach 10\.0\.0\.0\/8/,
      ],
      [
        "node egress to the cloud metadata address",
        (o) => {
          const rule = find(o, "NetworkPolicy", "dedicated-nodes-egress", "rpc-gateway-nodes").spec.egress[1];
          rule.to[0].ipBlock.except = rule.to[0].ipBlock.except.filter((c: string) => c !== "169.254.0.0/16");
        },
        /lets nodes reach 169\.254\.0\.0\/16/,
      ],
      [
        "node egress to every port",
        (o) => {
          delete find(o, "NetworkPolicy", "dedicated-nodes-egress", "rpc-gateway-nodes").spec.egress[1].ports;
        },
        /without ports opens every port/,
      ],
      [
        "node egress to everything",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-egress", "rpc-gateway-nodes").spec.egress.push({});
        },
        /without `to` reaches everything/,
      ],
      [
        "node egress to the gateway's pods",
        (o) => {
          find(o, "NetworkPolicy", "dedicated-nodes-egress", "rpc-gateway-nodes").spec.egress.push({
            to: [
              {
                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "rpc-gateway" } },
                podSelector: {},
              },
            ],
            ports: [{ protocol: "TCP", port: 6379 }],
          });
        },
        /an egress peer inside the cluster other than DNS/,
      ],
      [
        "no egress policy for the nodes",
        (o) => {
          o.splice(
            o.findIndex((x) => x.kind === "NetworkPolicy" && x.metadata.name === "dedicated-nodes-egress"),
            1,
          );
        },
        /no egress NetworkPolicy in rpc-gateway-nodes selects dedicated-node pods/,
      ],
      [
        "the whole pod range as trusted proxies",
        (o) => {
          o.find(
            (x) => x.kind === "ConfigMap" && x.metadata.name.startsWith("rpc-gateway-common"),
          )!.data.TRUSTED_PROXIES = "10.244.0.0/16";
        },
        /TRUSTED_PROXIES 10\.244\.0\.0\/16 trusts 65536 addresses/,
      ],
      [
        "the nodes' namespace at baseline",
        (o) => {
          o.find((x) => x.kind === "Namespace" && x.metadata.name === "rpc-gateway-nodes")!.metadata.labels[
            "pod-security.kubernetes.io/enforce"
          ] = "baseline";
        },
        /rpc-gateway-nodes does not enforce the restricted Pod Security Standard/,
      ],
      [
        "local node provider",
        (o) => {
          o.find(
            (x) => x.kind === "ConfigMap" && x.metadata.name.startsWith("rpc-gateway-worker"),
          )!.data.NODE_PROVIDER = "local";
        },
        /NODE_PROVIDER/,
      ],
      [
        "ServiceMonitor on a missing port",
        (o) => {
          find(o, "ServiceMonitor", "data-plane").spec.endpoints[0].port = "http";
        },
        /ServiceMonitor port http not on the Service/,
      ],
      [
        "ServiceMonitor scraping the public Service",
        (o) => {
          find(o, "ServiceMonitor", "data-plane").spec.selector.matchLabels["app.kubernetes.io/component"] =
            "data-plane";
        },
        /must select the data-plane-metrics Service only/,
      ],
      [
        "the worker's ServiceMonitor scraping nothing",
        (o) => {
          find(o, "ServiceMonitor", "worker").spec.selector.matchLabels["app.kubernetes.io/component"] =
            "worker";
        },
        /must select the worker-metrics Service only/,
      ],
      [
        "the metrics port on the control plane's API Service",
        (o) => {
          find(o, "Service", "control-plane").spec.ports.push({
            name: "metrics",
            port: 9465,
            targetPort: "metrics",
          });
        },
        /public control-plane Service exposes the metrics port/,
      ],
      [
        "the worker's metrics left on loopback",
        (o) => {
          const env = workload(o, "worker").pod.containers[0].env;
          env.splice(
            env.findIndex((e: K8sObject) => e.name === "WORKER_METRICS_HOST"),
            1,
          );
        },
        /worker: metrics bound to loopback in a pod/,
      ],
      [
        "an alert rule edited in the PrometheusRule only",
        (o) => {
          find(o, "PrometheusRule", "rpc-gateway").spec.groups[0].rules[0].expr = "vector(1)";
        },
        /differ from deploy\/observability\/prometheus\/rules.yml/,
      ],
      [
        "the metrics port on the public Service",
        (o) => {
          find(o, "Service", "data-plane").spec.ports.push({
            name: "metrics",
            port: 9464,
            targetPort: "metrics",
          });
        },
        /public data-plane Service exposes the metrics port/,
      ],
      [
        "metrics left on loopback in the pod",
        (o) => {
          const env = dp(o).pod.containers[0].env;
          env.splice(
            env.findIndex((e: K8sObject) => e.name === "METRICS_HOST"),
            1,
          );
        },
        /metrics bound to loopback in a pod/,
      ],
    ];
    for (const [what, breakIt, expected] of cases) {
      it(what, () => {
        const copy = structuredClone(production);
        breakIt(copy);
        assert.throws(() => checkAll(copy, v), expected);
      });
    }
  });
});
