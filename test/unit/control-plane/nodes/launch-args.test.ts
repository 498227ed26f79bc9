import assert from "node:assert/strict";
import {
  checkLaunchArgs,
  LaunchArgsRefusedError,
  type LaunchDialect,
  launchDialect,
  vetLaunchArgs,
} from "../../../../control-plane/src/nodes/launch-args";
import { createNodeProvider, loadNodeConfig } from "../../../../control-plane/src/nodes/node.config";
import { NodeType, RpcMethods } from "../../../../control-plane/src/nodes/node.types";
import { type KubeApi, KubernetesProvider } from "../../../../control-plane/src/nodes/providers/kubernetes";
import { launchArgs, type NodeSpec } from "../../../../control-plane/src/nodes/providers/provider";

function refused(dialect: LaunchDialect, args: string[], why: RegExp): void {
  const r = checkLaunchArgs(dialect, args);
  assert.equal(r.ok, false, `${dialect} accepted ${JSON.stringify(args)}`);
  if (!r.ok) assert.match(r.message, why, JSON.stringify(args));
}

/** Hostile launch args of issue 13 (loopback values only): every one refused, naming the flag. */
const HOSTILE: [LaunchDialect, string[], RegExp][] = [
  ["anvil", ["--fork-url", "http://127.0.0.1:9/"], /--fork-url is not allowed/],
  ["anvil", ["--fork-url=http://127.0.0.1:9/"], /--fork-url is not allowed/],
  ["anvil", ["-f", "http://127.0.0.1:9/"], /not a flag/],
  ["anvil", ["--rpc-url", "http://127.0.0.1:9/"], /--rpc-url is not allowed/],
  ["anvil", ["--dump-state", "/tmp/x"], /--dump-state is not allowed/],
  ["anvil", ["--config-out", "/tmp/x"], /--config-out is not allowed/],
  ["anvil", ["--load-state", "/tmp/x"], /--load-state is not allowed/],
  ["anvil", ["--state", "/tmp/x"], /--state is not allowed/],
  ["anvil", ["--init", "/tmp/genesis.json"], /--init is not allowed/],
  ["anvil", ["--ipc"], /--ipc is not allowed/],
  ["anvil", ["--ipc=/tmp/anvil.ipc"], /--ipc is not allowed/],
  ["anvil", ["--host", "0.0.0.0"], /--host is set by the platform/],
  ["anvil", ["--port=1"], /--port is set by the platform/],
  ["anvil", ["--allow-origin", "*"], /--allow-origin is not allowed/],
  ["anvil", ["--no-cors"], /--no-cors is not allowed/],
  ["anvil", ["--mnemonic", "test test test"], /--mnemonic is not allowed/],
  ["polkadot", ["--unsafe-rpc-external"], /--unsafe-rpc-external is not allowed/],
  ["polkadot", ["--rpc-external"], /set by the platform/],
  ["polkadot", ["--rpc-cors", "all"], /--rpc-cors is not allowed/],
  ["polkadot", ["--rpc-cors=all"], /--rpc-cors is not allowed/],
  ["polkadot", ["--dev"], /--dev is not allowed/],
  ["polkadot", ["--chain", "/etc/passwd"], /--chain takes one of/],
  ["polkadot", ["--chain=./spec.json"], /--chain takes one of/],
  ["polkadot", ["--telemetry-url", "ws://127.0.0.1:9/submit 0"], /--telemetry-url is not allowed/],
  ["polkadot", ["--bootnodes", "/ip4/127.0.0.1/tcp/9/p2p/x"], /--bootnodes is not allowed/],
  ["polkadot", ["--keystore-path", "/tmp/x"], /--keystore-path is not allowed/],
  ["polkadot", ["--rpc-methods", "Unsafe"], /set by the platform/],
  ["polkadot", ["--base-path=/"], /set by the platform/],
  ["polkadot", ["--name", "x"], /set by the platform/],
  ["polkadot", ["-d", "/tmp/x"], /not a flag/],
  ["geth", ["--http.api", "eth,admin,personal"], /--http.api is set by the platform/],
  ["geth", ["--http.api=eth,admin,personal"], /--http.api is set by the platform/],
  ["geth", ["--ws.api", "admin"], /set by the platform/],
  ["geth", ["--http.corsdomain", "*"], /not allowed/],
  ["geth", ["--http.vhosts", "*"], /not allowed/],
  ["geth", ["--ipcpath", "/tmp/x"], /not allowed/],
  ["geth", ["--config", "/tmp/x.toml"], /not allowed/],
  ["geth", ["--allow-insecure-unlock"], /not allowed/],
  ["geth", ["--datadir", "/"], /set by the platform/],
  ["geth", ["--ethstats", "x:y@127.0.0.1:9"], /not allowed/],
  // Hidden in values, repeats, positional args, look-alikes.
  ["anvil", ["--accounts", "--fork-url=http://127.0.0.1:9/"], /integer/],
  ["anvil", ["--hardfork", "cancun --dump-state /tmp/x"], /takes one of/],
  ["anvil", ["--accounts=3", "--accounts=4"], /more than once/],
  ["anvil", ["--accounts", "3", "--accounts", "3"], /more than once/],
  ["anvil", ["--no-mining", "--no-mining"], /more than once/],
  ["anvil", ["--no-mining=/tmp/x"], /takes no value/],
  ["anvil", ["--no-mining", "http://127.0.0.1:9/"], /not a flag/],
  ["anvil", ["/tmp/x"], /not a flag/],
  ["anvil", ["\u2010\u2010fork-url", "http://127.0.0.1:9/"], /not a flag/], // Unicode hyphens
  ["anvil", ["\u2014fork-url", "http://127.0.0.1:9/"], /not a flag/], // em dash
  ["anvil", ["--f\u043Erk-url", "http://127.0.0.1:9/"], /not a flag/], // Cyrillic o
  ["anvil", ["--\uFF41ccounts", "3"], /not a flag/], // full-width a
  ["anvil", ["--ACCOUNTS", "3"], /not a flag/],
  ["anvil", ["--accounts\u0000", "3"], /not a flag/],
  ["anvil", ["--accounts"], /needs a value/],
  ["geth", ["--cache", "1e9"], /integer/],
  // Allowed flags with bad values.
  ["anvil", ["--accounts", "0"], /integer from 1 to 100/],
  ["anvil", ["--accounts", "101"], /integer from 1 to 100/],
  ["anvil", ["--accounts", "-1"], /integer/],
  ["anvil", ["--accounts", "0x10"], /integer/],
  ["anvil", ["--accounts", " 3"], /integer/],
  ["anvil", ["--accounts", "03"], /integer/],
  ["anvil", ["--chain-id", "99999999999999999999"], /integer/],
  ["anvil", ["--hardfork", "Cancun"], /takes one of/],
  ["anvil", ["--order", ""], /takes one of/],
  ["substrate-test-node", ["--sync-rate", "not-a-number"], /--sync-rate takes an integer/],
  ["polkadot", ["--sync-rate", "5"], /--sync-rate is not allowed for polkadot/],
  ["geth", ["--verbosity", "6"], /integer from 0 to 5/],
];

describe("dedicated nodes: launch-arg allow-list", () => {
  it("refuses every hostile or malformed example, naming the flag", () => {
    for (const [dialect, args, why] of HOSTILE) refused(dialect, args, why);
  });

  it("refuses the same flag a second time however it is written", () => {
    refused("substrate-test-node", ["--sync-rate=3", "--sync-rate", "3"], /more than once/);
  });

  it("accepts allowed flags in both forms and passes them on as single --flag=value tokens", () => {
    const ok = (d: LaunchDialect, args: string[]) => {
      const r = checkLaunchArgs(d, args);
      assert.ok(r.ok, r.ok ? "" : r.message);
      return r.argv;
    };
    assert.deepEqual(
      ok("anvil", ["--accounts", "3", "--block-time=2", "--no-mining", "--hardfork", "cancun"]),
      ["--accounts=3", "--block-time=2", "--no-mining", "--hardfork=cancun"],
    );
    assert.deepEqual(ok("polkadot", ["--chain", "kusama", "--rpc-max-connections=500", "--no-telemetry"]), [
      "--chain=kusama",
      "--rpc-max-connections=500",
      "--no-telemetry",
    ]);
    assert.deepEqual(ok("substrate-test-node", ["--sync-target", "30", "--sync-rate", "300"]), [
      "--sync-target=30",
      "--sync-rate=300",
    ]);
    assert.deepEqual(ok("geth", ["--cache", "4096", "--sepolia"]), ["--cache=4096", "--sepolia"]);
    assert.deepEqual(ok("anvil", []), []);
  });

  it("the dialect follows the provider: test node / anvil locally, polkadot / geth on Kubernetes", () => {
    assert.equal(launchDialect("SUBSTRATE", "local"), "substrate-test-node");
    assert.equal(launchDialect("EVM", "local"), "anvil");
    assert.equal(launchDialect("SUBSTRATE", "kubernetes"), "polkadot");
    assert.equal(launchDialect("EVM", "kubernetes"), "geth");
  });

  it("providers say which list applies; another local SUBSTRATE program gets polkadot's list only", () => {
    const local = (env: NodeJS.ProcessEnv) => createNodeProvider(loadNodeConfig(env));
    assert.equal(local({}).dialect("SUBSTRATE"), "substrate-test-node");
    assert.equal(local({}).dialect("EVM"), "anvil");
    assert.equal(local({ NODE_SUBSTRATE_COMMAND: "/opt/polkadot" }).dialect("SUBSTRATE"), "polkadot");
    assert.equal(
      local({ NODE_SUBSTRATE_COMMAND: "/opt/wrapper.sh", NODE_SUBSTRATE_FLAGS: "test-node" }).dialect(
        "SUBSTRATE",
      ),
      "substrate-test-node",
    );
    const k8s = local({ NODE_PROVIDER: "kubernetes" });
    assert.equal(k8s.dialect("SUBSTRATE"), "polkadot");
    assert.equal(k8s.dialect("EVM"), "geth");
  });

  const spec = (over: Partial<NodeSpec>): NodeSpec => ({
    nodeId: "00000000-0000-4000-8000-000000000001",
    workspaceId: "w",
    displayName: "--unsafe-rpc-external",
    protocol: "SUBSTRATE",
    nodeType: NodeType.FULL,
    imageVersion: "v",
    image: "parity/polkadot:v1.17.1",
    rpcPort: 9944,
    region: "local",
    lightningRestore: false,
    rpcMethods: RpcMethods.SAFE,
    extraArgs: [],
    generation: 1,
    ...over,
  });

  it("providers re-check stored args before building a command line (rows from before the allow-list)", () => {
    for (const extraArgs of [["--unsafe-rpc-external"], ["--rpc-cors", "all"], ["--sync-rate", "x"]]) {
      assert.throws(
        () => launchArgs(spec({ extraArgs }), { port: 1, basePath: "/d", dialect: "substrate-test-node" }),
        (e: unknown) =>
          e instanceof LaunchArgsRefusedError && /launch args refused/.test((e as Error).message),
      );
    }
    assert.throws(
      () => vetLaunchArgs("anvil", ["--fork-url", "http://127.0.0.1:9/"]),
      LaunchArgsRefusedError,
    );
    // A display name that looks like a flag stays the value of --name.
    const args = launchArgs(spec({}), { port: 1, basePath: "/d", dialect: "polkadot" });
    assert.ok(args.includes("--name=--unsafe-rpc-external"));
    assert.ok(!args.includes("--unsafe-rpc-external"));
  });

  it("the Kubernetes pod spec re-checks too, never exposes admin/personal, and can still scale a bad row to 0", async () => {
    const calls: { replicas?: number; args?: string[] }[] = [];
    const notFound = () => Promise.reject(Object.assign(new Error("nf"), { code: 404 }));
    const api = {
      core: {},
      apps: {
        readNamespacedStatefulSet: notFound,
        createNamespacedStatefulSet: (a: {
          body: { spec: { replicas: number; template: { spec: { containers: { args: string[] }[] } } } };
        }) => {
          calls.push({ replicas: a.body.spec.replicas, args: a.body.spec.template.spec.containers[0]!.args });
          return Promise.resolve({});
        },
      },
    } as unknown as KubeApi;
    const k = new KubernetesProvider(api, { namespace: "ns" });
    const evm = spec({ protocol: "EVM", rpcMethods: RpcMethods.UNSAFE, extraArgs: ["--cache", "512"] });
    const args = k.containerArgs(evm);
    const apiList = args[args.indexOf("--http.api") + 1]!;
    assert.ok(!/admin|personal/.test(apiList), apiList);
    assert.ok(args.includes("--cache=512"));
    assert.throws(
      () => k.containerArgs({ ...evm, extraArgs: ["--http.api", "eth,admin,personal"] }),
      LaunchArgsRefusedError,
    );
    assert.throws(
      () => k.containerArgs(spec({ extraArgs: ["--unsafe-rpc-external"] })),
      LaunchArgsRefusedError,
    );
    await k.stop({ ...evm, extraArgs: ["--http.corsdomain", "*"] }, {});
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.replicas, 0);
    assert.ok(!calls[0]!.args!.includes("--http.corsdomain"));
  });
});
