import { UnrecoverableError } from "bullmq";
import type { Protocol } from "./catalog";

/**
 * Tenant launch arguments ("extra" args of a dedicated node) are an allow-list per node program: each flag is
 * either a switch or takes one value checked by an integer range or an enum. Nothing that names a path, URL,
 * host, origin (CORS), external/unsafe RPC exposure, or loads / dumps state or config is listed, so a tenant
 * cannot make the node read or write host files, connect to arbitrary addresses (e.g. anvil
 * `--fork-url http://169.254.169.254/`) or expose itself. Ports, bind address, rpc-methods / enabled APIs,
 * data dirs and node name are set by the provider only (PLATFORM_FLAGS).
 *
 * The same check runs at the GraphQL boundary (deploy / update) and again in every provider right before it
 * builds a command line or pod spec, so rows stored before this list existed cannot reach a node either.
 * Accepted forms: `--flag`, `--flag value` (two items) and `--flag=value`; each flag at most once. The
 * provider always passes the canonical single-token form (`--flag=value`), so a value can never be read as a
 * flag by the node's own parser.
 */

type ValueRule =
  | { kind: "switch" }
  | { kind: "int"; min: number; max: number }
  | { kind: "enum"; values: readonly string[] };

const SWITCH: ValueRule = { kind: "switch" };
const int = (min: number, max: number): ValueRule => ({ kind: "int", min, max });
const oneOf = (...values: string[]): ValueRule => ({ kind: "enum", values });

/** Which program reads the args: the local provider runs the Substrate test node / anvil, Kubernetes runs polkadot / geth. */
export type LaunchDialect = "polkadot" | "substrate-test-node" | "anvil" | "geth";

const POLKADOT: Record<string, ValueRule> = {
  // Named chains only: polkadot's --chain also takes a chain-spec file path.
  "--chain": oneOf("polkadot", "kusama", "westend", "paseo", "rococo", "local"),
  "--sync": oneOf("full", "fast", "fast-unsafe", "warp"),
  "--database": oneOf("auto", "rocksdb", "paritydb"),
  "--db-cache": int(16, 65_536), // MiB
  "--trie-cache-size": int(0, 17_179_869_184), // bytes (16 GiB)
  "--in-peers": int(0, 1000),
  "--out-peers": int(0, 1000),
  "--in-peers-light": int(0, 1000),
  "--max-runtime-instances": int(1, 32),
  "--rpc-max-connections": int(1, 100_000),
  "--rpc-max-request-size": int(1, 256), // MiB
  "--rpc-max-response-size": int(1, 256), // MiB
  "--rpc-max-subscriptions-per-connection": int(1, 100_000),
  "--rpc-message-buffer-capacity-per-connection": int(1, 1_000_000),
  "--rpc-rate-limit": int(1, 1_000_000), // calls per minute
  "--enable-offchain-indexing": oneOf("true", "false"),
  "--no-telemetry": SWITCH,
  "--no-prometheus": SWITCH,
  "--no-mdns": SWITCH,
  "--no-hardware-benchmarks": SWITCH,
};

/** Integer knobs of the Substrate test node (test/substrate-node/args.ts), which the local provider runs. */
const SUBSTRATE_TEST_NODE: Record<string, ValueRule> = {
  ...POLKADOT,
  "--block-time-ms": int(50, 600_000),
  "--start-block": int(0, 1_000_000_000),
  "--sync-target": int(0, 1_000_000_000),
  "--sync-rate": int(1, 1_000_000), // blocks per second
  "--peers": int(0, 1000),
  "--finality-lag": int(0, 1000),
};

const ANVIL: Record<string, ValueRule> = {
  "--accounts": int(1, 100),
  "--balance": int(0, 1_000_000_000_000), // ether per account
  "--block-time": int(1, 3600), // seconds
  "--chain-id": int(1, 4_294_967_295),
  "--gas-limit": int(1, 1_000_000_000_000),
  "--gas-price": int(0, 1_000_000_000_000_000),
  "--block-base-fee-per-gas": int(0, 1_000_000_000_000_000),
  "--code-size-limit": int(1, 10_000_000),
  "--hardfork": oneOf("prague", "cancun", "shanghai", "paris", "london", "berlin", "istanbul", "latest"),
  "--order": oneOf("fees", "fifo"),
  "--slots-in-an-epoch": int(1, 1024),
  "--transaction-block-keeper": int(1, 1_000_000),
  "--max-persisted-states": int(1, 10_000),
  "--max-transactions": int(1, 1_000_000),
  "--timestamp": int(0, 4_294_967_295),
  "--number": int(0, 1_000_000_000),
  "--memory-limit": int(1_048_576, 17_179_869_184), // bytes
  "--no-mining": SWITCH,
  "--mixed-mining": SWITCH,
  "--steps-tracing": SWITCH,
  "--print-traces": SWITCH,
  "--disable-block-gas-limit": SWITCH,
  "--disable-code-size-limit": SWITCH,
  "--disable-min-priority-fee": SWITCH,
  "--disable-console-log": SWITCH,
  "--disable-default-create2-deployer": SWITCH,
};

const GETH: Record<string, ValueRule> = {
  "--cache": int(128, 65_536), // MiB
  "--maxpeers": int(0, 1000),
  "--verbosity": int(0, 5),
  "--state.scheme": oneOf("hash", "path"),
  "--history.transactions": int(0, 1_000_000_000),
  "--txpool.pricelimit": int(0, 1_000_000_000_000),
  "--txpool.accountslots": int(1, 100_000),
  "--txpool.globalslots": int(1, 1_000_000),
  "--txpool.accountqueue": int(1, 100_000),
  "--txpool.globalqueue": int(1, 1_000_000),
  "--rpc.gascap": int(0, 1_000_000_000_000),
  "--rpc.batch-request-limit": int(1, 100_000),
  "--rpc.batch-response-max-size": int(1, 1_073_741_824), // bytes
  "--mainnet": SWITCH,
  "--sepolia": SWITCH,
  "--holesky": SWITCH,
  "--nodiscover": SWITCH,
};

const ALLOWED: Record<LaunchDialect, Record<string, ValueRule>> = {
  polkadot: POLKADOT,
  "substrate-test-node": SUBSTRATE_TEST_NODE,
  anvil: ANVIL,
  geth: GETH,
};

/** Set by the providers (ports, bind address, API exposure, data dirs, name, node type): never by a tenant. */
const PLATFORM_FLAGS = new Set([
  "--rpc-port",
  "--rpc-methods",
  "--base-path",
  "--name",
  "--validator",
  "--state-pruning",
  "--blocks-pruning",
  "--rpc-external",
  "--node-key-file",
  "--port",
  "--host",
  "--datadir",
  "--http",
  "--http.addr",
  "--http.port",
  "--http.api",
  "--ws",
  "--ws.addr",
  "--ws.port",
  "--ws.api",
  "--gcmode",
  "--syncmode",
]);

export const MAX_EXTRA_ARGS = 32;
const MAX_ARG_CHARS = 256;
/** ASCII only: a Unicode look-alike ("‐‐fork-url", full-width letters) never matches an allowed name. */
const FLAG_NAME = /^--[a-z0-9]+(?:[.-][a-z0-9]+)*$/;
const INT = /^(?:0|[1-9][0-9]{0,18})$/;

export type LaunchArgsCheck = { ok: true; argv: string[] } | { ok: false; message: string };

/**
 * The dialect a provider's default node program speaks for a protocol (the local provider speaks polkadot's
 * when NODE_SUBSTRATE_COMMAND replaces the test node: see LocalProcessProvider.dialect).
 */
export function launchDialect(protocol: Protocol, providerName: string): LaunchDialect {
  if (protocol === "SUBSTRATE") return providerName === "kubernetes" ? "polkadot" : "substrate-test-node";
  return providerName === "kubernetes" ? "geth" : "anvil";
}

const show = (s: string) => JSON.stringify(s);

/** Validates tenant args against the dialect's allow-list; on success, the canonical argv to pass on. */
export function checkLaunchArgs(dialect: LaunchDialect, args: readonly string[]): LaunchArgsCheck {
  const allowed = ALLOWED[dialect];
  if (args.length > MAX_EXTRA_ARGS)
    return { ok: false, message: `At most ${MAX_EXTRA_ARGS} extra arguments` };
  const seen = new Set<string>();
  const argv: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!;
    if (typeof token !== "string" || token.length === 0 || token.length > MAX_ARG_CHARS) {
      return { ok: false, message: `Each extra argument must be 1-${MAX_ARG_CHARS} characters` };
    }
    const eq = token.indexOf("=");
    const name = eq < 0 ? token : token.slice(0, eq);
    if (!FLAG_NAME.test(name)) {
      return {
        ok: false,
        message: `Launch argument ${show(token)} is not a flag: extra arguments are --flag, --flag value or --flag=value (ASCII flag names)`,
      };
    }
    if (PLATFORM_FLAGS.has(name)) {
      return { ok: false, message: `Launch flag ${name} is set by the platform and cannot be overridden` };
    }
    const rule = allowed[name];
    if (rule === undefined) {
      return {
        ok: false,
        message: `Launch flag ${name} is not allowed for ${dialect} nodes; allowed: ${Object.keys(allowed).join(" ")}`,
      };
    }
    if (seen.has(name)) return { ok: false, message: `Launch flag ${name} is given more than once` };
    seen.add(name);
    if (rule.kind === "switch") {
      if (eq >= 0) return { ok: false, message: `Launch flag ${name} takes no value` };
      argv.push(name);
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = token.slice(eq + 1);
    else value = args[++i];
    if (value === undefined) return { ok: false, message: `Launch flag ${name} needs a value` };
    if (rule.kind === "int") {
      const n = INT.test(value) ? Number(value) : Number.NaN;
      if (!(n >= rule.min && n <= rule.max)) {
        return {
          ok: false,
          message: `Launch flag ${name} takes an integer from ${rule.min} to ${rule.max}, got ${show(value)}`,
        };
      }
    } else if (!rule.values.includes(value)) {
      return {
        ok: false,
        message: `Launch flag ${name} takes one of ${rule.values.join(", ")}, got ${show(value)}`,
      };
    }
    argv.push(`${name}=${value}`);
  }
  return { ok: true, argv };
}

/** A stored launch arg the provider refuses (a row from before the allow-list): retrying cannot help. */
export class LaunchArgsRefusedError extends UnrecoverableError {
  constructor(message: string) {
    super(`launch args refused: ${message}`);
    this.name = "LaunchArgsRefusedError";
  }
}

/** Provider-side re-check: the canonical argv, or throws LaunchArgsRefusedError. */
export function vetLaunchArgs(dialect: LaunchDialect, args: readonly string[]): string[] {
  const r = checkLaunchArgs(dialect, args);
  if (!r.ok) throw new LaunchArgsRefusedError(r.message);
  return r.argv;
}
