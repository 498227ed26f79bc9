import type { NetworkRecord } from "../../../shared/src/redis/records";

/**
 * Which JSON-RPC methods a shared node may serve. A blocked method is answered per element with -32601
 * and a message saying why; it never reaches an upstream.
 */
export interface MethodPolicy {
  /**
   * `undefined` when allowed, else the message for the client. `params` (the call's, absent = undefined)
   * is read only for the few methods whose danger is in them (`readsParams`).
   */
  check(method: string, network: NetworkRecord, params?: unknown): string | undefined;
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

const CONNECTS = "it makes the node connect to an address of the caller's choosing";
const LISTENS = "it opens a new RPC listener on the node, outside the gateway";
const HOST_FILES = "it reads or writes files on the node's host";

/**
 * Methods refused on every endpoint, shared or dedicated, Safe or Unsafe (lowercased): they reach past the
 * node itself. The gateway's dedicated nodes run on the operator's hosts and network, so a node told to
 * connect somewhere (a fork URL, a peer) would let a tenant make requests from inside that network
 * (SSRF); a new listener would serve RPC around the gateway; a path would touch the host's files. Methods
 * that only change the node's own chain (anvil_setBalance, evm_mine, debug_setHead, anvil_reset without a
 * fork) are the owner's business on an Unsafe dedicated node.
 */
const REACH = new Map<string, string>([
  ["anvil_setrpcurl", CONNECTS],
  ["hardhat_setrpcurl", CONNECTS],
  ["admin_addpeer", CONNECTS],
  ["admin_addtrustedpeer", CONNECTS],
  ["system_addreservedpeer", CONNECTS],
  ["parity_addreservedpeer", CONNECTS],
  ["admin_starthttp", LISTENS],
  ["admin_startws", LISTENS],
  ["admin_startrpc", LISTENS],
  ["admin_exportchain", HOST_FILES],
  ["admin_importchain", HOST_FILES],
  ["debug_writeblockprofile", HOST_FILES],
  ["debug_writememprofile", HOST_FILES],
  ["debug_writemutexprofile", HOST_FILES],
  ["debug_blockprofile", HOST_FILES],
  ["debug_mutexprofile", HOST_FILES],
  ["debug_cpuprofile", HOST_FILES],
  ["debug_startcpuprofile", HOST_FILES],
  ["debug_gotrace", HOST_FILES],
  ["debug_startgotrace", HOST_FILES],
]);

/**
 * Resets that fork when given a config (`anvil_reset` / `hardhat_reset` with `{ forking: { jsonRpcUrl } }`):
 * allowed only with no params, `[]`, `[null]` or `[{}]` (a plain reset of the local chain); anything
 * else is refused, whatever its spelling, as a node told where to connect.
 */
const RESETS = new Set(["anvil_reset", "hardhat_reset"]);

/** Whether `check` reads this method's params (a batch must not take one element's verdict for the next). */
export function readsParams(method: string): boolean {
  // Called per call: a cheap test on the first letter (a / h, either case) before any lowercasing.
  const m = method.trim();
  const c = m.charCodeAt(0) | 0x20;
  if (c !== 0x61 && c !== 0x68) return false;
  return RESETS.has(m.toLowerCase());
}

function plainReset(params: unknown): boolean {
  if (params === undefined || params === null) return true;
  if (!Array.isArray(params) || params.length > 1) return false;
  const p = params[0];
  if (p === undefined || p === null) return true;
  return typeof p === "object" && !Array.isArray(p) && Object.keys(p).length === 0;
}

/** Why `method` (with `params`) is refused on every endpoint, or undefined. */
export function reachRefusal(method: string, params: unknown): string | undefined {
  const lower = method.trim().toLowerCase();
  const why = REACH.get(lower);
  if (why !== undefined) return why;
  if (RESETS.has(lower) && !plainReset(params)) return `${CONNECTS} (a fork URL)`;
  return undefined;
}

/** The message of a method refused on every endpoint. */
export function reachMessage(method: string, why: string): string {
  return `${method} is not available on any endpoint: ${why}`;
}

/**
 * `debug_*` methods a shared node with `allowDebug` still refuses: they change the node for every tenant
 * (rewinding the chain, logging, GC, compaction), unlike the tracing reads allowDebug is for.
 */
const SHARED_DEBUG_DENY = new Set(
  [
    "debug_setHead",
    "debug_setGCPercent",
    "debug_setBlockProfileRate",
    "debug_setMutexProfileFraction",
    "debug_setTrieFlushInterval",
    "debug_verbosity",
    "debug_vmodule",
    "debug_freeOSMemory",
    "debug_chaindbCompact",
    "debug_stopCPUProfile",
    "debug_stopGoTrace",
  ].map((m) => m.toLowerCase()),
);

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
  const reach = REACH.get(method.toLowerCase());
  if (reach !== undefined) return blocked(reach);
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
  if (DEBUG_NAMESPACES.has(ns)) {
    return SHARED_DEBUG_DENY.has(method.toLowerCase()) ? blocked(ADMIN) : DEBUG;
  }
  if (extra.has(ns)) return ALLOWED;
  return blocked(UNSAFE_NAMESPACES.get(ns.toLowerCase()) ?? UNKNOWN);
}

const DEBUG_NODE = "it debugs the node (heavy, and some debug_* methods change it)";

/**
 * What a node started with `--rpc-methods Safe` refuses (its own chain's namespaces stay open), plus
 * account, dev-node and `debug_*` methods: only known-unsafe names, not an allow-list, so names are
 * compared trimmed and lowercased throughout (a deny list must not be stepped around by spelling).
 */
function decideSafeMode(name: string): Decision {
  const method = name.trim().toLowerCase();
  const ns = namespaceOf(method);
  const unsafeNs = UNSAFE_NAMESPACES.get(ns);
  if (unsafeNs !== undefined) return blocked(unsafeNs);
  if (ns === "debug") return blocked(DEBUG_NODE);
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
    // Every REACH method is refused here by name (the resets are in namespaces shared nodes never serve).
    return REACH.has(method.trim().toLowerCase())
      ? reachMessage(method, d.why)
      : blockedMessage(method, d.why);
  }
}

/**
 * A dedicated node in Safe mode: the known-unsafe methods and namespaces are refused (`debug_*` too),
 * anything else (including the chain's own namespaces) reaches the node. `undefined` when allowed, else
 * the reason. The methods refused on every endpoint (`reachRefusal`) are the node gateway's to add.
 */
export class SafeModeMethodPolicy {
  private readonly memo = new DecisionMemo(decideSafeMode);

  /** `undefined` when allowed, else why it is refused. */
  refusal(method: string): string | undefined {
    const d = this.memo.get(method);
    return d.verdict === Verdict.Blocked ? d.why : undefined;
  }
}
