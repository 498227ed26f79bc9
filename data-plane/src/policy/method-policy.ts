import type { NetworkRecord } from "../../../shared/src/redis/records";

/**
 * Which JSON-RPC methods a shared node may serve. A blocked method is answered per element with -32601
 * and a message saying why; it never reaches an upstream.
 */
export interface MethodPolicy {
  /** `undefined` when allowed, else the message for the client. */
  check(method: string, network: NetworkRecord): string | undefined;
}

const STATE = "it changes node state";
const KEYS = "it reads or changes the node's keystore";
const ACCOUNTS = "it uses accounts unlocked on the node";
const ADMIN = "it administers the node";
const DEV = "it controls a development node";
const PEERS = "it reveals the node's peers and network identity";
const HEAVY = "it is too expensive for a shared node";
const POOL = "it reads the node's transaction pool";
const CLIENT = "it is a client-specific extension";
const MINING = "it feeds the node's miner";
const UNKNOWN = "its namespace is not served on shared nodes";

/** A method's standing, before the network's `allowDebug` is applied. */
const Verdict = {
  Allowed: 0,
  Blocked: 1,
  /** `debug_*` / `trace_*`: allowed only where the network allows debug methods. */
  Debug: 2,
} as const;
type Verdict = (typeof Verdict)[keyof typeof Verdict];

interface Decision {
  readonly verdict: Verdict;
  /** Why it is blocked (Blocked only). */
  readonly why: string;
}

const ALLOWED: Decision = Object.freeze({ verdict: Verdict.Allowed, why: "" });
const DEBUG: Decision = Object.freeze({ verdict: Verdict.Debug, why: "" });
const blocked = (why: string): Decision => Object.freeze({ verdict: Verdict.Blocked, why });

/**
 * A namespace served on shared nodes (the text before the first `_`): every method in it is allowed
 * except `deny` (exact names) and `denyPrefixes`; with `only`, just those methods are allowed.
 */
interface NamespaceRule {
  readonly only?: ReadonlySet<string>;
  readonly onlyWhy?: string;
  readonly deny?: ReadonlyMap<string, string>;
  readonly denyPrefixes?: readonly (readonly [prefix: string, why: string])[];
}

/**
 * The namespaces shared nodes serve (an allow-list: a namespace not named here, e.g. a client's new
 * `les_*` or `foo_*`, is refused by default), with the unsafe methods inside them.
 */
const SHARED_NAMESPACES = lowercaseRules([
  [
    "eth",
    {
      // Every `eth_sign*` variant (eth_sign, eth_signTransaction, eth_signTypedData, _v1, _v3, _v4, ...).
      denyPrefixes: [["eth_sign", ACCOUNTS]],
      deny: new Map([
        ["eth_sendTransaction", ACCOUNTS],
        ["eth_submitWork", MINING],
        ["eth_submitHashrate", MINING],
      ]),
    },
  ],
  ["net", {}],
  ["web3", {}],
  ["rpc", {}],
  ["chain", {}],
  [
    "state",
    {
      deny: new Map([
        ["state_traceBlock", HEAVY],
        ["state_getPairs", HEAVY],
        ["state_queryStorage", HEAVY],
      ]),
    },
  ],
  ["childstate", {}],
  [
    "system",
    {
      // The chain's and the node's public facts; peers, network state, dry runs, reserved peers and log
      // filters are not (system_peers, system_networkState, system_unstable_networkState, system_dryRun,
      // system_addReservedPeer, system_localListenAddresses, ...).
      only: new Set([
        "system_chain",
        "system_chainType",
        "system_name",
        "system_version",
        "system_properties",
        "system_health",
        "system_accountNextIndex",
        "system_nodeRoles",
        "system_syncState",
      ]),
      onlyWhy: PEERS,
      deny: new Map([
        ["system_dryRun", HEAVY],
        ["system_addReservedPeer", ADMIN],
        ["system_removeReservedPeer", ADMIN],
        ["system_addLogFilter", ADMIN],
        ["system_resetLogFilter", ADMIN],
      ]),
    },
  ],
  [
    "author",
    {
      // Submitting and watching extrinsics and reading the pool; key management and removals are not.
      only: new Set([
        "author_submitExtrinsic",
        "author_submitAndWatchExtrinsic",
        "author_unwatchExtrinsic",
        "author_pendingExtrinsics",
      ]),
      onlyWhy: STATE,
      deny: new Map([
        ["author_rotateKeys", KEYS],
        ["author_insertKey", KEYS],
        ["author_hasKey", KEYS],
        ["author_hasSessionKeys", KEYS],
      ]),
    },
  ],
  ["payment", {}],
  ["grandpa", {}],
  ["beefy", {}],
  ["mmr", {}],
  ["babe", { deny: new Map([["babe_epochAuthorship", KEYS]]) }],
  // Legacy Substrate aliases of chain_subscribeNewHead(s) (ws/methods.ts).
  ["subscribe", { only: new Set(["subscribe_newHead"]), onlyWhy: UNKNOWN }],
  ["unsubscribe", { only: new Set(["unsubscribe_newHead"]), onlyWhy: UNKNOWN }],
]);

/**
 * The rules with every name lowercased: decisions compare a method's trimmed, lowercased name, because
 * nodes differ in how strictly they match names (some accept `eth_SIGN` or a trailing space), and a deny
 * rule that a spelling can step around is no rule.
 */
function lowercaseRules(entries: readonly (readonly [string, NamespaceRule])[]): Map<string, NamespaceRule> {
  const out = new Map<string, NamespaceRule>();
  for (const [ns, r] of entries) {
    out.set(ns.toLowerCase(), {
      only: r.only && new Set([...r.only].map((m) => m.toLowerCase())),
      onlyWhy: r.onlyWhy,
      deny: r.deny && new Map([...r.deny].map(([m, why]) => [m.toLowerCase(), why] as const)),
      denyPrefixes: r.denyPrefixes?.map(([p, why]) => [p.toLowerCase(), why] as const),
    });
  }
  return out;
}

/** Namespaces refused with a specific reason (anything else not in SHARED_NAMESPACES is refused too). */
const UNSAFE_NAMESPACES = new Map<string, string>([
  ["admin", ADMIN],
  ["personal", ACCOUNTS],
  ["miner", ADMIN],
  ["engine", ADMIN],
  ["clique", ADMIN],
  ["offchain", STATE],
  ["sudo", ADMIN],
  ["txpool", POOL],
  ["les", CLIENT],
  ["parity", CLIENT],
  ["erigon", CLIENT],
  ["dev", DEV],
  ["anvil", DEV],
  ["hardhat", DEV],
  ["evm", DEV],
  ["ganache", DEV],
  ["sync", HEAVY],
]);

/** Namespaces gated on the network's `allowDebug`. */
const DEBUG_NAMESPACES = new Set(["debug", "trace"]);

/** Bound of the per-method memo: method names come from clients, so it must not grow without limit. */
const MEMO_MAX_ENTRIES = 4096;

export function blockedMessage(method: string, why: string): string {
  return `${method} is not available on shared nodes: ${why}; use a dedicated node`;
}

function debugMessage(method: string): string {
  return `${method} is not available on this network's shared nodes: debug methods are disabled; use a dedicated node`;
}

function namespaceOf(method: string): string {
  const us = method.indexOf("_");
  return us <= 0 ? "" : method.slice(0, us);
}

/**
 * Shared nodes: the namespace allow-list is matched as spelled (trimmed): `Eth_call` is in no allowed
 * namespace and is refused. Inside an allowed namespace, deny and allow-only rules compare the lowercased
 * name (see lowercaseRules). The client's spelling stays in messages.
 */
function decideShared(name: string, extra: ReadonlySet<string>): Decision {
  const method = name.trim();
  const ns = namespaceOf(method);
  const rule = SHARED_NAMESPACES.get(ns);
  if (rule !== undefined) {
    const lower = method.toLowerCase();
    const denied = rule.deny?.get(lower);
    if (denied !== undefined) return blocked(denied);
    if (rule.denyPrefixes !== undefined) {
      for (const [prefix, why] of rule.denyPrefixes) if (lower.startsWith(prefix)) return blocked(why);
    }
    if (rule.only !== undefined && !rule.only.has(lower)) return blocked(rule.onlyWhy ?? UNKNOWN);
    return ALLOWED;
  }
  if (DEBUG_NAMESPACES.has(ns)) return DEBUG;
  if (extra.has(ns)) return ALLOWED;
  return blocked(UNSAFE_NAMESPACES.get(ns.toLowerCase()) ?? UNKNOWN);
}

/**
 * What a node started with `--rpc-methods Safe` refuses (its own chain's namespaces stay open), plus
 * account and dev-node methods: only known-unsafe names, not an allow-list, so names are compared
 * trimmed and lowercased throughout (a deny list must not be stepped around by spelling).
 */
function decideSafeMode(name: string): Decision {
  const method = name.trim().toLowerCase();
  const ns = namespaceOf(method);
  const unsafeNs = UNSAFE_NAMESPACES.get(ns);
  if (unsafeNs !== undefined) return blocked(unsafeNs);
  const rule = SHARED_NAMESPACES.get(ns);
  if (rule === undefined) return ALLOWED;
  const denied = rule.deny?.get(method);
  if (denied !== undefined) return blocked(denied);
  if (rule.denyPrefixes !== undefined) {
    for (const [prefix, why] of rule.denyPrefixes) if (method.startsWith(prefix)) return blocked(why);
  }
  if (ns === "author" && !rule.only!.has(method)) return blocked(STATE);
  if (SAFE_MODE_DENY.has(method)) return blocked(PEERS);
  return ALLOWED;
}

/** Beyond the deny lists above, what a Safe-mode Substrate node refuses in `system_*`. */
const SAFE_MODE_DENY = new Set(
  ["system_peers", "system_networkState", "system_unstable_networkState"].map((m) => m.toLowerCase()),
);

/** Memoised decisions per method name (bounded; past the bound, decisions are computed each time). */
class DecisionMemo {
  private readonly memo = new Map<string, Decision>();
  constructor(private readonly decide: (method: string) => Decision) {}

  get(method: string): Decision {
    let d = this.memo.get(method);
    if (d === undefined) {
      d = this.decide(method);
      if (this.memo.size < MEMO_MAX_ENTRIES) this.memo.set(method, d);
    }
    return d;
  }
}

export interface SharedNodePolicyOptions {
  /**
   * Namespaces shared nodes also serve, beyond the built-in allow-list (chain-specific ones such as
   * `bor` or `zks`; SHARED_NODE_EXTRA_NAMESPACES). A namespace named here is served whole.
   */
  extraNamespaces?: readonly string[];
}

/**
 * The shared-node policy: namespaces are allowed by name (eth, net, web3, rpc, chain, state, childstate,
 * system, author, payment, grandpa, beefy, mmr, babe), with their unsafe methods refused; `debug_*` and
 * `trace_*` follow the network's `allowDebug`; every other namespace is refused, so an unsafe namespace
 * nobody listed yet is refused by default. One Map lookup per call once a method name has been seen.
 */
export class SharedNodeMethodPolicy implements MethodPolicy {
  private readonly memo: DecisionMemo;

  constructor(opts: SharedNodePolicyOptions = {}) {
    const extra = new Set<string>();
    for (const ns of opts.extraNamespaces ?? []) {
      const n = ns.trim().replace(/_+$/, "");
      // The unsafe and debug namespaces stay where they are: an operator cannot open them by accident.
      if (n !== "" && !UNSAFE_NAMESPACES.has(n) && !DEBUG_NAMESPACES.has(n)) extra.add(n);
    }
    this.memo = new DecisionMemo((m) => decideShared(m, extra));
  }

  check(method: string, network: NetworkRecord): string | undefined {
    const d = this.memo.get(method);
    if (d.verdict === Verdict.Allowed) return undefined;
    if (d.verdict === Verdict.Debug) return network.allowDebug ? undefined : debugMessage(method);
    return blockedMessage(method, d.why);
  }
}

/**
 * A dedicated node in Safe mode: the known-unsafe methods and namespaces are refused, anything else
 * (including the chain's own namespaces and `debug_*`) reaches the node. `undefined` when allowed, else
 * the reason.
 */
export class SafeModeMethodPolicy {
  private readonly memo = new DecisionMemo(decideSafeMode);

  /** `undefined` when allowed, else why it is refused. */
  refusal(method: string): string | undefined {
    const d = this.memo.get(method);
    return d.verdict === Verdict.Blocked ? d.why : undefined;
  }
}
