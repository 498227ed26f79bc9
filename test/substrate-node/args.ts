import type { RpcMethodsMode, SubstrateTestNodeOptions } from "./node";

/**
 * Command line of the substrate test node. It takes the flags a real polkadot-sdk node is launched with
 * (so a node provider can start either program with the same launch args), plus a few test-only ones:
 *
 *   real:      --rpc-port N, --rpc-methods Safe|Unsafe|Auto, --rpc-external, --unsafe-rpc-external,
 *              --chain NAME, --dev, --name NAME, --base-path DIR (-d), --validator, --tmp;
 *              accepted and ignored: --port, --prometheus-port, --rpc-cors, --rpc-max-connections, --log/-l,
 *              --blocks-pruning, --sync, --bootnodes, --node-key, --telemetry-url,
 *              --no-telemetry, --no-prometheus, --no-mdns, --prometheus-external, --rpc-rate-limit, ...
 *   real, simulated: --state-pruning N|archive|archive-canonical (and its old name --pruning): see
 *              SubstrateTestNodeOptions.statePruning;
 *   test-only: --host ADDR, --block-time-ms N, --start-block N, --sync-target N, --sync-rate N (blocks/s),
 *              --peers N, --finality-lag N
 *
 * Environment (flags win): SUBSTRATE_TEST_NODE_PORT, SUBSTRATE_TEST_NODE_HOST, SUBSTRATE_TEST_NODE_BLOCK_TIME_MS,
 * SUBSTRATE_TEST_NODE_SYNC_TARGET, SUBSTRATE_TEST_NODE_SYNC_RATE, SUBSTRATE_TEST_NODE_RPC_METHODS.
 * Default port 9944, like a real node.
 */

const IGNORED_WITH_VALUE = new Set([
  "--port",
  "--prometheus-port",
  "--rpc-cors",
  "--rpc-max-connections",
  "--rpc-max-request-size",
  "--rpc-max-response-size",
  "--rpc-max-subscriptions-per-connection",
  "--rpc-rate-limit",
  "--rpc-message-buffer-capacity-per-connection",
  "--log",
  "-l",
  "--blocks-pruning",
  "--sync",
  "--bootnodes",
  "--node-key",
  "--node-key-file",
  "--telemetry-url",
  "--public-addr",
  "--listen-addr",
  "--in-peers",
  "--out-peers",
  "--database",
  "--db-cache",
  "--execution",
  "--wasm-execution",
  "--keystore-path",
  "--password",
  "--offchain-worker",
  "--max-runtime-instances",
  "--trie-cache-size",
]);

const IGNORED_FLAGS = new Set([
  "--no-telemetry",
  "--no-prometheus",
  "--prometheus-external",
  "--no-mdns",
  "--discover-local",
  "--allow-private-ip",
  "--no-private-ip",
  "--force-authoring",
  "--unsafe-force-node-key-generation",
  "--alice",
  "--bob",
  "--charlie",
  "--dave",
  "--eve",
  "--ferdie",
  "--one",
  "--two",
  "--insecure-validator-i-know-what-i-do",
  "--no-hardware-benchmarks",
  "--enable-offchain-indexing",
]);

export interface ParsedArgs {
  options: SubstrateTestNodeOptions;
  port: number;
  /** Flags not recognised (reported on stderr, never fatal: real nodes grow flags all the time). */
  unknown: string[];
}

function toInt(flag: string, v: string | undefined): number {
  if (v === undefined || !/^[0-9]+$/.test(v))
    throw new Error(`${flag}: expected a non-negative integer, got ${v}`);
  return Number.parseInt(v, 10);
}

function toMode(flag: string, v: string | undefined): RpcMethodsMode {
  const m = (v ?? "").toLowerCase();
  if (m === "safe") return "Safe";
  if (m === "unsafe") return "Unsafe";
  if (m === "auto") return "Auto";
  throw new Error(`${flag}: expected Safe, Unsafe or Auto, got ${v}`);
}

export function parseArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ParsedArgs {
  const options: SubstrateTestNodeOptions = {};
  const unknown: string[] = [];
  let port = env.SUBSTRATE_TEST_NODE_PORT
    ? toInt("SUBSTRATE_TEST_NODE_PORT", env.SUBSTRATE_TEST_NODE_PORT)
    : 9944;
  if (env.SUBSTRATE_TEST_NODE_HOST) options.host = env.SUBSTRATE_TEST_NODE_HOST;
  if (env.SUBSTRATE_TEST_NODE_BLOCK_TIME_MS)
    options.blockTimeMs = toInt("SUBSTRATE_TEST_NODE_BLOCK_TIME_MS", env.SUBSTRATE_TEST_NODE_BLOCK_TIME_MS);
  if (env.SUBSTRATE_TEST_NODE_SYNC_TARGET)
    options.syncTargetBlock = toInt("SUBSTRATE_TEST_NODE_SYNC_TARGET", env.SUBSTRATE_TEST_NODE_SYNC_TARGET);
  if (env.SUBSTRATE_TEST_NODE_SYNC_RATE)
    options.syncBlocksPerSecond = toInt("SUBSTRATE_TEST_NODE_SYNC_RATE", env.SUBSTRATE_TEST_NODE_SYNC_RATE);
  if (env.SUBSTRATE_TEST_NODE_RPC_METHODS)
    options.rpcMethods = toMode("SUBSTRATE_TEST_NODE_RPC_METHODS", env.SUBSTRATE_TEST_NODE_RPC_METHODS);

  for (let i = 0; i < argv.length; i++) {
    let flag = argv[i]!;
    let inline: string | undefined;
    const eq = flag.indexOf("=");
    if (flag.startsWith("-") && eq > 0) {
      inline = flag.slice(eq + 1);
      flag = flag.slice(0, eq);
    }
    const value = () => {
      if (inline !== undefined) return inline;
      i++;
      return argv[i];
    };
    switch (flag) {
      case "--rpc-port":
        port = toInt(flag, value());
        break;
      case "--rpc-methods":
        options.rpcMethods = toMode(flag, value());
        break;
      case "--rpc-external":
        options.rpcExternal = true;
        options.host ??= "0.0.0.0";
        break;
      case "--unsafe-rpc-external":
        // Listen on all interfaces; with Auto, unsafe methods stay exposed (that is what "unsafe" names).
        options.host ??= "0.0.0.0";
        options.rpcMethods ??= "Unsafe";
        break;
      case "--host":
        options.host = value();
        break;
      case "--chain":
        options.chain = value();
        break;
      case "--dev":
        options.chain ??= "dev";
        options.validator = true;
        break;
      case "--name":
        options.nodeName = value();
        break;
      case "--base-path":
      case "-d":
        options.basePath = value();
        break;
      case "--tmp":
        break;
      case "--validator":
        options.validator = true;
        break;
      case "--block-time-ms":
        options.blockTimeMs = toInt(flag, value());
        break;
      case "--start-block":
        options.startBlock = toInt(flag, value());
        break;
      case "--sync-target":
        options.syncTargetBlock = toInt(flag, value());
        break;
      case "--sync-rate":
        options.syncBlocksPerSecond = toInt(flag, value());
        break;
      case "--peers":
        options.peers = toInt(flag, value());
        break;
      case "--state-pruning":
      case "--pruning": {
        const v = value();
        if (v === "archive" || v === "archive-canonical") options.statePruning = undefined;
        else options.statePruning = toInt(flag, v);
        break;
      }
      case "--finality-lag":
        options.finalityLag = toInt(flag, value());
        break;
      default:
        if (IGNORED_WITH_VALUE.has(flag)) {
          value();
        } else if (!IGNORED_FLAGS.has(flag)) {
          unknown.push(argv[i]!);
          // An unknown `--flag value` pair: skip the value too, so it is not taken for a flag.
          if (inline === undefined && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith("-")) {
            unknown.push(argv[i + 1]!);
            i++;
          }
        }
    }
  }
  return { options, port, unknown };
}
