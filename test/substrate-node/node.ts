/**
 * SUBSTRATE TEST NODE: an honest stand-in, NOT a Substrate node.
 *
 * No real Substrate/Polkadot node binary can be installed on this project's machines, so this small program
 * answers JSON-RPC the way a polkadot-sdk node does, over HTTP and WebSocket on one port: the real method
 * names, parameter forms, result shapes, subscription notification shapes, `--rpc-methods Safe|Unsafe|Auto`
 * policy and its error (-32601 "RPC call is unsafe to be called externally"), and real storage keys and
 * SCALE encodings for the few storage items a gateway worker reads (System::Number, Staking::Validators,
 * Session::Validators, Session::NextKeys).
 *
 * What it does NOT do (and never pretends to): no runtime, no consensus, no networking, no signature or
 * extrinsic decoding. Block hashes, state roots and transaction hashes are SHA-256 of deterministic inputs
 * (a real node uses blake2-256); `state_getMetadata` returns a tiny fixed blob that is not real metadata;
 * storage history is not kept (a storage read `at` any known block answers the current value, except
 * System::Number); only the most recent 65,536 block hashes are indexed (older ones answer like a pruned node).
 * `--state-pruning N` makes reads `at` blocks N or more below the finalized one fail as a pruned node's do.
 *
 * Chain simulation: the "network" produces a block every `blockTimeMs`. The node's own best block follows it;
 * when it is behind (started with `syncTargetBlock`, or after `fallBehind(n)`), it imports
 * `syncBlocksPerSecond` blocks per second and reports `isSyncing: true` until caught up, like a major sync.
 *
 * Test-only control methods are under the `testnode_*` namespace (not listed by `rpc_methods`) and as JS
 * hooks on the returned object, so a test can steer a node it spawned as a separate process.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { blake2b } from "@noble/hashes/blake2b";
import { type WebSocket, WebSocketServer } from "ws";
import {
  encodeAccountIdVec,
  encodeCompact,
  encodeU32,
  encodeU64,
  encodeValidatorPrefs,
  fromHex,
  toHex,
} from "./scale";
import {
  base58Encode,
  parseAccountId,
  SESSION_VALIDATORS_KEY,
  SYSTEM_NUMBER_KEY,
  sessionNextKeysKey,
  stakingValidatorsKey,
} from "./storage-keys";

export type RpcMethodsMode = "Safe" | "Unsafe" | "Auto";

export interface SubstrateTestNodeOptions {
  /** Interface to bind (default 127.0.0.1). `Auto` RPC policy counts anything but loopback as external. */
  host?: string;
  /** 0 (default) lets the OS pick a free port. */
  port?: number;
  /** The network produces one block per interval (default 6000, like Polkadot). 0 = only `produceBlocks()`. */
  blockTimeMs?: number;
  /** Local best block at start (default 0). */
  startBlock?: number;
  /** Network head at start; above `startBlock` the node starts syncing toward it. Default: `startBlock`. */
  syncTargetBlock?: number;
  /** Blocks imported per second while syncing (default 1000). */
  syncBlocksPerSecond?: number;
  /** Finalized = best - finalityLag (default 2, like GRANDPA usually trails). */
  finalityLag?: number;
  /**
   * `--state-pruning N`: state kept for the last N finalized blocks and every block above them; reads at
   * older blocks fail with 4003 "State already discarded", as a pruned node's. Undefined = archive.
   */
  statePruning?: number;
  /** `--rpc-methods` (default Auto: unsafe methods allowed only when listening on loopback). */
  rpcMethods?: RpcMethodsMode;
  /** `--rpc-external`: counts as external for `Auto` even on loopback. */
  rpcExternal?: boolean;
  /** `--chain`: dev (default), local, polkadot, kusama, westend, or any name. */
  chain?: string;
  /** `--name`: the node's name (only shown in logs by a real node). */
  nodeName?: string;
  /** `--validator`: `system_nodeRoles` answers Authority. */
  validator?: boolean;
  /** Peers reported by `system_health` (default 0 on dev, 8 otherwise). */
  peers?: number;
  /** `--base-path`: the node keeps its best block, keystore and test storage there across restarts. */
  basePath?: string;
  /** Key types produced by `author_rotateKeys`, 32 bytes each (default gran, babe, imon, audi: 128 bytes). */
  sessionKeyTypes?: string[];
  /** Wall-clock time of block 0 (for the timestamp inherent). Default: now - startBlock * blockTime. */
  genesisTimeMs?: number;
}

export interface ValidatorCandidate {
  /** 0x-hex AccountId32 or SS58 address of the stash. */
  accountId: string;
  /** Commission in parts per billion (default 0). */
  commissionPerbill?: number;
  blocked?: boolean;
}

export interface SubstrateTestNode {
  httpUrl: string;
  wsUrl: string;
  port: number;
  /** Effective policy: "Unsafe" when unsafe methods are served, else "Safe". */
  readonly effectiveRpcMethods: "Safe" | "Unsafe";
  close(): Promise<void>;
  bestNumber(): number;
  finalizedNumber(): number;
  networkHead(): number;
  isSyncing(): boolean;
  blockHash(n: number): string;
  /** Network produces `n` blocks now (the node imports them at once when synced, else syncs). */
  produceBlocks(n?: number): void;
  /** The network jumps `n` blocks ahead: the node reports isSyncing until it has imported them. */
  fallBehind(n: number): void;
  /** Stops/resumes importing (a stalled node stays behind and keeps isSyncing true). */
  setSyncPaused(paused: boolean): void;
  /** Rounds of the sync timer run so far (paused or not): a test waits for rounds, not for time. */
  syncRounds(): number;
  setPeers(n: number): void;
  /** Replaces Staking::Validators (the declared candidates). Accepts 0x-hex or SS58 ids. */
  setValidatorCandidates(candidates: Array<string | ValidatorCandidate>): void;
  /** Replaces Session::Validators (the active set). */
  setActiveSet(accountIds: string[]): void;
  /** Sets Session::NextKeys(account) to raw session keys (0x-hex), or removes it with null. */
  setSessionNextKeys(accountId: string, keys: string | null): void;
  /** Raw storage write (0x-hex key and SCALE value; null deletes). */
  setStorage(key: string, value: string | null): void;
  /** Runtime upgrade: merges into the runtime version and notifies `state_runtimeVersion` subscribers. */
  setRuntimeVersion(patch: Partial<RuntimeVersion>): void;
  /** Keys in the keystore (from author_insertKey / author_rotateKeys). */
  keystore(): Array<{ keyType: string; publicKey: string }>;
  /** Requests served per method since start (HTTP + WS, batch elements counted one each). */
  requestCounts(): Record<string, number>;
  /**
   * What `system_accountNextIndex(account)` answers for `account` (the string as sent; default 0). This
   * stand-in cannot read an extrinsic's signer, so a test sets the index a real node would derive from the
   * account's nonce and its transactions in the pool.
   */
  setAccountNextIndex(account: string, index: number): void;
  /** Open WebSocket connections. */
  wsConnections(): number;
}

export interface RuntimeVersion {
  specName: string;
  implName: string;
  authoringVersion: number;
  specVersion: number;
  implVersion: number;
  apis: Array<[string, number]>;
  transactionVersion: number;
  systemVersion: number;
}

interface Header {
  parentHash: string;
  number: string;
  stateRoot: string;
  extrinsicsRoot: string;
  digest: { logs: string[] };
}

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

const METHOD_NOT_FOUND = () => new RpcError(-32601, "Method not found");
const UNSAFE = () => new RpcError(-32601, "RPC call is unsafe to be called externally");
const invalidParams = (why: string) => new RpcError(-32602, "Invalid params", why);

const CHAINS: Record<
  string,
  { name: string; type: string; properties: Record<string, unknown>; spec: string }
> = {
  dev: {
    name: "Development",
    type: "Development",
    properties: { ss58Format: 42, tokenDecimals: 12, tokenSymbol: "UNIT" },
    spec: "node",
  },
  local: {
    name: "Local Testnet",
    type: "Local",
    properties: { ss58Format: 42, tokenDecimals: 12, tokenSymbol: "UNIT" },
    spec: "node",
  },
  polkadot: {
    name: "Polkadot",
    type: "Live",
    properties: { ss58Format: 0, tokenDecimals: 10, tokenSymbol: "DOT" },
    spec: "polkadot",
  },
  kusama: {
    name: "Kusama",
    type: "Live",
    properties: { ss58Format: 2, tokenDecimals: 12, tokenSymbol: "KSM" },
    spec: "kusama",
  },
  westend: {
    name: "Westend",
    type: "Live",
    properties: { ss58Format: 42, tokenDecimals: 12, tokenSymbol: "WND" },
    spec: "westend",
  },
};

/** Runtime API ids (blake2_64 of the trait name) as a real runtime lists them. */
const RUNTIME_APIS: Array<[string, number]> = [
  ["0xdf6acb689907609b", 5], // Core
  ["0x37e397fc7c91f5e4", 2], // Metadata
  ["0x40fe3ad401f8959a", 6], // BlockBuilder
  ["0xd2bc9897eed08f15", 3], // TaggedTransactionQueue
  ["0xf78b278be53f454c", 2], // OffchainWorkerApi
  ["0xab3c0572291feb8b", 1], // SessionKeys
  ["0xed99c5acb25eedf5", 3], // GrandpaApi
  ["0xbc9d89904f5b923f", 1], // AccountNonceApi
  ["0x37c8bb1350a9a2a8", 4], // TransactionPaymentApi
];

/** Methods that polkadot-sdk guards with `check_if_safe` (refused unless unsafe RPC is allowed). */
const UNSAFE_METHODS = new Set([
  "author_insertKey",
  "author_rotateKeys",
  "author_hasSessionKeys",
  "author_hasKey",
  "author_removeExtrinsic",
  "system_peers",
  "system_networkState",
  "system_addReservedPeer",
  "system_removeReservedPeer",
  "system_addLogFilter",
  "system_resetLogFilter",
  "system_dryRun",
  "state_traceBlock",
  "offchain_localStorageGet",
  "offchain_localStorageSet",
  "dev_getBlockStats",
]);

type SubKind = "newHead" | "finalizedHead" | "allHead" | "runtimeVersion" | "storage" | "extrinsic";

/** subscribe method -> [kind, notification method, unsubscribe methods]. */
const SUBSCRIBE: Record<string, { kind: SubKind; notify: string }> = {
  chain_subscribeNewHeads: { kind: "newHead", notify: "chain_newHead" },
  chain_subscribeNewHead: { kind: "newHead", notify: "chain_newHead" },
  subscribe_newHead: { kind: "newHead", notify: "chain_newHead" },
  chain_subscribeFinalizedHeads: { kind: "finalizedHead", notify: "chain_finalizedHead" },
  chain_subscribeFinalisedHeads: { kind: "finalizedHead", notify: "chain_finalizedHead" },
  chain_subscribeAllHeads: { kind: "allHead", notify: "chain_allHead" },
  state_subscribeRuntimeVersion: { kind: "runtimeVersion", notify: "state_runtimeVersion" },
  chain_subscribeRuntimeVersion: { kind: "runtimeVersion", notify: "state_runtimeVersion" },
  state_subscribeStorage: { kind: "storage", notify: "state_storage" },
  author_submitAndWatchExtrinsic: { kind: "extrinsic", notify: "author_extrinsicUpdate" },
};

const UNSUBSCRIBE: Record<string, SubKind> = {
  chain_unsubscribeNewHeads: "newHead",
  chain_unsubscribeNewHead: "newHead",
  unsubscribe_newHead: "newHead",
  chain_unsubscribeFinalizedHeads: "finalizedHead",
  chain_unsubscribeFinalisedHeads: "finalizedHead",
  chain_unsubscribeAllHeads: "allHead",
  state_unsubscribeRuntimeVersion: "runtimeVersion",
  chain_unsubscribeRuntimeVersion: "runtimeVersion",
  state_unsubscribeStorage: "storage",
  author_unwatchExtrinsic: "extrinsic",
};

interface Subscription {
  id: string;
  kind: SubKind;
  notify: string;
  ws: WebSocket;
  /** storage: watched keys (null = all) and the last values sent. */
  keys?: string[] | null;
  last?: Map<string, string | null>;
}

interface PoolTx {
  hex: string;
  hash: string;
  watchers: Subscription[];
  inBlock?: number;
}

const HASH_INDEX_WINDOW = 65_536;

function sha256Hex(s: string): string {
  return `0x${createHash("sha256").update(s).digest("hex")}`;
}

function subscriptionId(): string {
  // jsonrpsee's RandomStringIdProvider: 16 alphanumeric characters.
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = randomBytes(16);
  let s = "";
  for (const b of bytes) s += alphabet[b % alphabet.length];
  return s;
}

function isLoopback(host: string): boolean {
  return host === "127.0.0.1" || host === "::1" || host === "localhost" || host.startsWith("127.");
}

function asBlockNumber(v: unknown): number | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 0) return v;
  if (typeof v === "string") {
    if (/^0x[0-9a-fA-F]+$/.test(v)) return Number.parseInt(v.slice(2), 16);
    if (/^[0-9]+$/.test(v)) return Number.parseInt(v, 10);
  }
  return null;
}

export async function startSubstrateTestNode(
  opts: SubstrateTestNodeOptions = {},
): Promise<SubstrateTestNode> {
  const host = opts.host ?? "127.0.0.1";
  const blockTimeMs = opts.blockTimeMs ?? 6000;
  const chainKey = (opts.chain ?? "dev").toLowerCase();
  const chain = CHAINS[chainKey] ?? {
    name: opts.chain ?? "Development",
    type: "Live",
    properties: { ss58Format: 42, tokenDecimals: 12, tokenSymbol: "UNIT" },
    spec: "node",
  };
  const finalityLag = opts.finalityLag ?? 2;
  const statePruning = opts.statePruning;
  const syncRate = Math.max(1, opts.syncBlocksPerSecond ?? 1000);
  const mode: RpcMethodsMode = opts.rpcMethods ?? "Auto";
  const unsafeAllowed = mode === "Unsafe" || (mode === "Auto" && !opts.rpcExternal && isLoopback(host));
  const sessionKeyTypes = opts.sessionKeyTypes ?? ["gran", "babe", "imon", "audi"];
  let peers = opts.peers ?? (chainKey === "dev" ? 0 : 8);
  const shouldHavePeers = chainKey !== "dev";

  // ------------------------------------------------------------------ chain state
  let best = opts.startBlock ?? 0;
  let networkHead = Math.max(best, opts.syncTargetBlock ?? best);
  let keystore: Array<{ keyType: string; publicKey: string }> = [];
  const storage = new Map<string, string>();
  const statePath = opts.basePath ? join(opts.basePath, "substrate-test-node-state.json") : null;
  if (statePath) {
    try {
      const saved = JSON.parse(readFileSync(statePath, "utf8")) as {
        best: number;
        networkHead: number;
        savedAtMs: number;
        keystore: Array<{ keyType: string; publicKey: string }>;
        storage: Array<[string, string]>;
      };
      best = saved.best;
      // The network kept producing while this node was down: it restarts behind and syncs.
      const missed = blockTimeMs > 0 ? Math.floor((Date.now() - saved.savedAtMs) / blockTimeMs) : 0;
      networkHead = Math.max(saved.networkHead + missed, best, opts.syncTargetBlock ?? 0);
      keystore = saved.keystore;
      for (const [k, v] of saved.storage) storage.set(k, v);
    } catch {
      // first start: nothing saved yet
    }
  }
  const startingBlock = best;
  const genesisTimeMs = opts.genesisTimeMs ?? Date.now() - networkHead * Math.max(blockTimeMs, 1);
  let syncPaused = false;
  let runtimeVersion: RuntimeVersion = {
    specName: chain.spec,
    implName: `${chain.spec}-test-node`,
    authoringVersion: 0,
    specVersion: 100,
    implVersion: 0,
    apis: RUNTIME_APIS,
    transactionVersion: 1,
    systemVersion: 1,
  };
  const hashCache = new Map<number, string>();
  const numberByHash = new Map<string, number>();
  const extrinsicsByBlock = new Map<number, string[]>();
  const pool: PoolTx[] = [];
  const nextIndex = new Map<string, number>();
  const counts: Record<string, number> = {};

  const blockHash = (n: number): string => {
    let h = hashCache.get(n);
    if (h === undefined) {
      h = sha256Hex(`substrate-test-node:${chainKey}:block:${n}`);
      hashCache.set(n, h);
      if (hashCache.size > HASH_INDEX_WINDOW * 2) {
        for (const k of hashCache.keys()) {
          if (hashCache.size <= HASH_INDEX_WINDOW) break;
          hashCache.delete(k);
        }
      }
    }
    return h;
  };
  const indexBlock = (n: number) => {
    numberByHash.set(blockHash(n), n);
    const old = n - HASH_INDEX_WINDOW;
    if (old >= 0) numberByHash.delete(sha256Hex(`substrate-test-node:${chainKey}:block:${old}`));
  };
  for (let n = Math.max(0, best - 255); n <= best; n++) indexBlock(n);
  numberByHash.set(blockHash(0), 0);

  const finalized = () => Math.max(0, best - finalityLag);
  const syncing = () => best < networkHead;

  const header = (n: number): Header => {
    // PreRuntime digest item (enum index 6), engine "aura", SCALE Vec<u8> of the u64 slot.
    const slot = encodeU64(BigInt(Math.floor((genesisTimeMs + n * blockTimeMs) / Math.max(blockTimeMs, 1))));
    const preRuntime = toHex(Buffer.concat([Buffer.from([6]), Buffer.from("aura"), encodeCompact(8), slot]));
    return {
      parentHash: n === 0 ? `0x${"00".repeat(32)}` : blockHash(n - 1),
      number: `0x${n.toString(16)}`,
      stateRoot: sha256Hex(`substrate-test-node:${chainKey}:state:${n}`),
      extrinsicsRoot: sha256Hex(
        `substrate-test-node:${chainKey}:extrinsics:${n}:${(extrinsicsByBlock.get(n) ?? []).join()}`,
      ),
      digest: { logs: n === 0 ? [] : [preRuntime] },
    };
  };

  /** timestamp.set(now) inherent: compact length, 0x04 (v4, unsigned), pallet 3, call 0, Compact<u64>. */
  const timestampInherent = (n: number): string => {
    const call = Buffer.concat([
      Buffer.from([0x04, 0x03, 0x00]),
      encodeCompact(BigInt(genesisTimeMs + n * blockTimeMs)),
    ]);
    return toHex(Buffer.concat([encodeCompact(call.length), call]));
  };

  const resolveAt = (at: unknown): number => {
    if (at === undefined || at === null) return best;
    if (typeof at !== "string") throw invalidParams("block hash expected");
    const n = numberByHash.get(at.toLowerCase());
    if (n === undefined || n > best || (statePruning !== undefined && n <= finalized() - statePruning))
      throw new RpcError(4003, `Client error: UnknownBlock: State already discarded for ${at}`);
    return n;
  };

  const storageValue = (key: string, at: number): string | null => {
    const k = key.toLowerCase();
    if (k === SYSTEM_NUMBER_KEY) return toHex(encodeU32(at));
    return storage.get(k) ?? null;
  };

  // ------------------------------------------------------------------ subscriptions
  const subs = new Map<string, Subscription>();
  const send = (ws: WebSocket, msg: unknown) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
  };
  const notify = (sub: Subscription, result: unknown) =>
    send(sub.ws, { jsonrpc: "2.0", method: sub.notify, params: { subscription: sub.id, result } });
  const subsOf = (kind: SubKind) => [...subs.values()].filter((s) => s.kind === kind);

  const storageChanges = (sub: Subscription, force: boolean): Array<[string, string | null]> => {
    const keys = sub.keys ?? [SYSTEM_NUMBER_KEY, ...storage.keys()];
    const changes: Array<[string, string | null]> = [];
    const last = sub.last ?? new Map<string, string | null>();
    sub.last = last;
    for (const key of keys) {
      const v = storageValue(key, best);
      if (force || !last.has(key) || last.get(key) !== v) changes.push([key, v]);
      last.set(key, v);
    }
    if (!sub.keys) for (const key of [...last.keys()]) if (!keys.includes(key)) last.delete(key);
    return changes;
  };
  const notifyStorage = () => {
    for (const sub of subsOf("storage")) {
      const changes = storageChanges(sub, false);
      if (changes.length > 0) notify(sub, { block: blockHash(best), changes });
    }
  };

  let saveTimer: NodeJS.Timeout | null = null;
  const save = () => {
    if (!statePath || !opts.basePath) return;
    mkdirSync(opts.basePath, { recursive: true });
    const tmp = `${statePath}.tmp`;
    writeFileSync(
      tmp,
      JSON.stringify({ best, networkHead, savedAtMs: Date.now(), keystore, storage: [...storage.entries()] }),
    );
    renameSync(tmp, statePath);
  };
  const saveSoon = () => {
    if (!statePath || saveTimer) return;
    saveTimer = setTimeout(() => {
      saveTimer = null;
      save();
    }, 1000);
  };

  /** Moves the local best block to `to` (import), with the notifications a real node would send. */
  const importUpTo = (to: number, announceEach: boolean) => {
    if (to <= best) return;
    const prevFinal = finalized();
    const from = best + 1;
    best = to;
    for (let n = Math.max(from, best - HASH_INDEX_WINDOW + 1); n <= best; n++) indexBlock(n);
    // Pending transactions go into the first imported block.
    if (pool.length > 0) {
      const txs = pool.filter((t) => t.inBlock === undefined);
      if (txs.length > 0) {
        extrinsicsByBlock.set(
          from,
          txs.map((t) => t.hex),
        );
        for (const t of txs) {
          t.inBlock = from;
          for (const w of t.watchers) notify(w, { inBlock: blockHash(from) });
        }
      }
    }
    if (!syncing()) {
      // Import notifications are not sent for blocks imported during a major sync: only the last one.
      const firstNotified = announceEach ? Math.max(from, best - 99) : best;
      for (let n = firstNotified; n <= best; n++) {
        const h = header(n);
        for (const sub of subsOf("allHead")) notify(sub, h);
        for (const sub of subsOf("newHead")) notify(sub, h);
      }
      notifyStorage();
    }
    const fin = finalized();
    if (fin > prevFinal) {
      if (!syncing()) for (const sub of subsOf("finalizedHead")) notify(sub, header(fin));
      for (let i = pool.length - 1; i >= 0; i--) {
        const t = pool[i]!;
        if (t.inBlock !== undefined && t.inBlock <= fin) {
          for (const w of t.watchers) {
            notify(w, { finalized: blockHash(t.inBlock) });
            subs.delete(w.id); // the real node ends the subscription after Finalized
          }
          pool.splice(i, 1);
        }
      }
    }
    saveSoon();
  };

  const produceBlocks = (n = 1) => {
    networkHead += n;
    // A synced node imports the new block at once; a syncing one catches up on the sync timer.
    if (!syncPaused && best === networkHead - n) importUpTo(networkHead, true);
  };

  const blockTimer = blockTimeMs > 0 ? setInterval(() => produceBlocks(1), blockTimeMs) : null;
  const SYNC_TICK_MS = 100;
  let syncRounds = 0;
  const syncTimer = setInterval(() => {
    syncRounds++;
    if (syncPaused || best >= networkHead) return;
    const step = Math.max(1, Math.round((syncRate * SYNC_TICK_MS) / 1000));
    importUpTo(Math.min(networkHead, best + step), false);
  }, SYNC_TICK_MS);
  blockTimer?.unref?.();
  syncTimer.unref?.();

  // ------------------------------------------------------------------ methods
  const allMethodNames = [
    "author_hasKey",
    "author_hasSessionKeys",
    "author_insertKey",
    "author_pendingExtrinsics",
    "author_removeExtrinsic",
    "author_rotateKeys",
    "author_submitAndWatchExtrinsic",
    "author_submitExtrinsic",
    "author_unwatchExtrinsic",
    "chain_getBlock",
    "chain_getBlockHash",
    "chain_getFinalisedHead",
    "chain_getFinalizedHead",
    "chain_getHead",
    "chain_getHeader",
    "chain_getRuntimeVersion",
    "chain_subscribeAllHeads",
    "chain_subscribeFinalisedHeads",
    "chain_subscribeFinalizedHeads",
    "chain_subscribeNewHead",
    "chain_subscribeNewHeads",
    "chain_subscribeRuntimeVersion",
    "chain_unsubscribeAllHeads",
    "chain_unsubscribeFinalisedHeads",
    "chain_unsubscribeFinalizedHeads",
    "chain_unsubscribeNewHead",
    "chain_unsubscribeNewHeads",
    "chain_unsubscribeRuntimeVersion",
    "rpc_methods",
    "state_call",
    "state_getKeys",
    "state_getKeysPaged",
    "state_getMetadata",
    "state_getRuntimeVersion",
    "state_getStorage",
    "state_getStorageHash",
    "state_getStorageSize",
    "state_queryStorageAt",
    "state_subscribeRuntimeVersion",
    "state_subscribeStorage",
    "state_unsubscribeRuntimeVersion",
    "state_unsubscribeStorage",
    "subscribe_newHead",
    "system_accountNextIndex",
    "system_addLogFilter",
    "system_addReservedPeer",
    "system_chain",
    "system_chainType",
    "system_health",
    "system_localListenAddresses",
    "system_localPeerId",
    "system_name",
    "system_networkState",
    "system_nodeRoles",
    "system_peers",
    "system_properties",
    "system_removeReservedPeer",
    "system_reservedPeers",
    "system_resetLogFilter",
    "system_syncState",
    "system_version",
    "unsubscribe_newHead",
  ];
  const peerId = `12D3KooW${base58Encode(
    createHash("sha256")
      .update(`peer:${chainKey}:${opts.nodeName ?? ""}`)
      .digest(),
  ).slice(0, 44)}`;
  const health = () => ({ peers, isSyncing: syncing(), shouldHavePeers });

  const asHex = (v: unknown, what: string): Buffer => {
    if (typeof v !== "string") throw invalidParams(`${what}: hex string expected`);
    try {
      return fromHex(v);
    } catch {
      throw invalidParams(`${what}: invalid hex`);
    }
  };

  const submit = (p: unknown[]): PoolTx => {
    const bytes = asHex(p[0], "extrinsic");
    if (bytes.length === 0) throw new RpcError(1001, "Extrinsic has invalid format: Not enough data");
    const hex = toHex(bytes);
    // As a real node: the extrinsic's 32-byte BLAKE2b (what a client computes from the bytes it sent).
    const hash = `0x${Buffer.from(blake2b(bytes, { dkLen: 32 })).toString("hex")}`;
    if (pool.some((t) => t.hash === hash))
      throw new RpcError(1013, "Transaction Already Imported", "The transaction is already in the pool.");
    const tx: PoolTx = { hex, hash, watchers: [] };
    pool.push(tx);
    return tx;
  };

  const setValidatorCandidates = (candidates: Array<string | ValidatorCandidate>) => {
    const prefix = stakingValidatorsKey(Buffer.alloc(32)).slice(0, 2 + 64);
    for (const k of [...storage.keys()]) if (k.startsWith(prefix)) storage.delete(k);
    for (const c of candidates) {
      const cand = typeof c === "string" ? { accountId: c } : c;
      storage.set(
        stakingValidatorsKey(parseAccountId(cand.accountId)),
        toHex(
          encodeValidatorPrefs({
            commissionPerbill: cand.commissionPerbill ?? 0,
            blocked: cand.blocked ?? false,
          }),
        ),
      );
    }
    notifyStorage();
    saveSoon();
  };
  const setActiveSet = (ids: string[]) => {
    storage.set(SESSION_VALIDATORS_KEY, toHex(encodeAccountIdVec(ids.map((a) => parseAccountId(a)))));
    notifyStorage();
    saveSoon();
  };
  const setStorage = (key: string, value: string | null) => {
    const k = toHex(fromHex(key));
    if (value === null) storage.delete(k);
    else storage.set(k, toHex(fromHex(value)));
    notifyStorage();
    saveSoon();
  };
  const setSessionNextKeys = (accountId: string, keys: string | null) => {
    setStorage(sessionNextKeysKey(parseAccountId(accountId)), keys);
  };
  const setRuntimeVersion = (patch: Partial<RuntimeVersion>) => {
    runtimeVersion = { ...runtimeVersion, ...patch };
    for (const sub of subsOf("runtimeVersion")) notify(sub, runtimeVersion);
  };

  /** Test-only control methods (not part of any real node). */
  const testMethods: Record<string, (p: unknown[]) => unknown> = {
    testnode_produceBlocks: (p) => {
      produceBlocks(asBlockNumber(p[0]) ?? 1);
      return best;
    },
    testnode_fallBehind: (p) => {
      const n = asBlockNumber(p[0]);
      if (n === null) throw invalidParams("block count expected");
      networkHead += n;
      return { best, networkHead };
    },
    testnode_setSyncPaused: (p) => {
      syncPaused = p[0] === true;
      return syncPaused;
    },
    testnode_setPeers: (p) => {
      const n = asBlockNumber(p[0]);
      if (n === null) throw invalidParams("peer count expected");
      peers = n;
      return peers;
    },
    testnode_setValidatorCandidates: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams("array of candidates expected");
      try {
        setValidatorCandidates(p[0] as Array<string | ValidatorCandidate>);
      } catch (e) {
        throw invalidParams((e as Error).message);
      }
      return null;
    },
    testnode_setActiveSet: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams("array of account ids expected");
      try {
        setActiveSet(p[0] as string[]);
      } catch (e) {
        throw invalidParams((e as Error).message);
      }
      return null;
    },
    testnode_setSessionNextKeys: (p) => {
      try {
        setSessionNextKeys(String(p[0]), p[1] === null || p[1] === undefined ? null : String(p[1]));
      } catch (e) {
        throw invalidParams((e as Error).message);
      }
      return null;
    },
    testnode_setStorage: (p) => {
      try {
        setStorage(String(p[0]), p[1] === null || p[1] === undefined ? null : String(p[1]));
      } catch (e) {
        throw invalidParams((e as Error).message);
      }
      return null;
    },
    testnode_setRuntimeVersion: (p) => {
      setRuntimeVersion((p[0] ?? {}) as Partial<RuntimeVersion>);
      return runtimeVersion;
    },
    testnode_state: () => ({
      best,
      finalized: finalized(),
      networkHead,
      isSyncing: syncing(),
      syncPaused,
      peers,
      rpcMethods: unsafeAllowed ? "Unsafe" : "Safe",
      keystore,
    }),
  };

  const methods: Record<string, (p: unknown[]) => unknown> = {
    rpc_methods: () => ({ methods: allMethodNames }),
    system_name: () => "Substrate Test Node (stand-in)",
    system_version: () => "0.1.0-test-node",
    system_chain: () => chain.name,
    system_chainType: () => chain.type,
    system_properties: () => chain.properties,
    system_health: () => health(),
    system_localPeerId: () => peerId,
    system_localListenAddresses: () => [`/ip4/127.0.0.1/tcp/30333/p2p/${peerId}`],
    system_nodeRoles: () => [opts.validator ? "Authority" : "Full"],
    system_syncState: () => ({ startingBlock, currentBlock: best, highestBlock: networkHead }),
    system_peers: () =>
      Array.from({ length: peers }, (_, i) => ({
        peerId: `12D3KooWTestPeer${i}`,
        roles: "FULL",
        bestHash: blockHash(networkHead),
        bestNumber: networkHead,
      })),
    system_networkState: () => ({ peerId, listenedAddresses: [], connectedPeers: {}, notConnectedPeers: {} }),
    system_reservedPeers: () => [],
    system_addReservedPeer: () => null,
    system_removeReservedPeer: () => null,
    system_addLogFilter: () => null,
    system_resetLogFilter: () => null,
    system_accountNextIndex: (p) => nextIndex.get(String(p[0])) ?? 0,
    chain_getBlockHash: (p) => {
      const one = (v: unknown): string | null => {
        if (v === undefined || v === null) return blockHash(best);
        const n = asBlockNumber(v);
        if (n === null) throw invalidParams("block number expected");
        return n <= best && n > best - HASH_INDEX_WINDOW ? blockHash(n) : n === 0 ? blockHash(0) : null;
      };
      return Array.isArray(p[0]) ? p[0].map(one) : one(p[0]);
    },
    chain_getHeader: (p) => {
      if (p[0] === undefined || p[0] === null) return header(best);
      if (typeof p[0] !== "string") throw invalidParams("block hash expected");
      const n = numberByHash.get(p[0].toLowerCase());
      return n === undefined || n > best ? null : header(n);
    },
    chain_getBlock: (p) => {
      let n = best;
      if (p[0] !== undefined && p[0] !== null) {
        if (typeof p[0] !== "string") throw invalidParams("block hash expected");
        const found = numberByHash.get(p[0].toLowerCase());
        if (found === undefined || found > best) return null;
        n = found;
      }
      const extrinsics = n === 0 ? [] : [timestampInherent(n), ...(extrinsicsByBlock.get(n) ?? [])];
      return { block: { header: header(n), extrinsics }, justifications: null };
    },
    chain_getFinalizedHead: () => blockHash(finalized()),
    state_getRuntimeVersion: () => runtimeVersion,
    state_getMetadata: () =>
      // "meta" magic + version byte 14 + an empty type registry: NOT real runtime metadata.
      toHex(Buffer.concat([Buffer.from("meta"), Buffer.from([14]), encodeCompact(0)])),
    state_call: () => {
      throw new RpcError(4003, "Client error: Execution failed: the substrate test node has no runtime");
    },
    state_getStorage: (p) => storageValue(toHex(asHex(p[0], "key")), resolveAt(p[1])),
    state_getStorageHash: (p) => {
      const v = storageValue(toHex(asHex(p[0], "key")), resolveAt(p[1]));
      return v === null ? null : sha256Hex(v);
    },
    state_getStorageSize: (p) => {
      const v = storageValue(toHex(asHex(p[0], "key")), resolveAt(p[1]));
      return v === null ? null : (v.length - 2) / 2;
    },
    state_getKeysPaged: (p) => {
      const prefix = toHex(asHex(p[0] ?? "0x", "prefix"));
      const count = asBlockNumber(p[1]);
      if (count === null) throw invalidParams("count expected");
      if (count > 1000) throw new RpcError(4002, "count exceeds maximum value. value: 1000, max: 1000");
      const startKey = p[2] ? toHex(asHex(p[2], "startKey")) : null;
      resolveAt(p[3]);
      return [SYSTEM_NUMBER_KEY, ...storage.keys()]
        .filter((k) => k.startsWith(prefix) && (startKey === null || k > startKey))
        .sort()
        .slice(0, count);
    },
    state_getKeys: (p) => {
      const prefix = toHex(asHex(p[0] ?? "0x", "prefix"));
      resolveAt(p[1]);
      return [SYSTEM_NUMBER_KEY, ...storage.keys()].filter((k) => k.startsWith(prefix)).sort();
    },
    state_queryStorageAt: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams("keys expected");
      const at = resolveAt(p[1]);
      return [
        {
          block: blockHash(at),
          changes: p[0].map((k) => {
            const key = toHex(asHex(k, "key"));
            return [key, storageValue(key, at)];
          }),
        },
      ];
    },
    author_submitExtrinsic: (p) => submit(p).hash,
    author_pendingExtrinsics: () => pool.filter((t) => t.inBlock === undefined).map((t) => t.hex),
    author_removeExtrinsic: () => [],
    author_rotateKeys: () => {
      const parts = sessionKeyTypes.map((keyType) => {
        const pub = randomBytes(32);
        keystore.push({ keyType, publicKey: toHex(pub) });
        return pub;
      });
      saveSoon();
      return toHex(Buffer.concat(parts));
    },
    author_insertKey: (p) => {
      const [keyType, suri, publicKey] = p;
      if (typeof keyType !== "string" || Buffer.byteLength(keyType) !== 4)
        throw new RpcError(1005, "The key type is not known", keyType);
      if (typeof suri !== "string") throw invalidParams("suri expected");
      keystore.push({ keyType, publicKey: toHex(asHex(publicKey, "publicKey")) });
      saveSoon();
      return null;
    },
    author_hasKey: (p) => {
      const pub = toHex(asHex(p[0], "publicKey"));
      return keystore.some((k) => k.publicKey === pub && k.keyType === p[1]);
    },
    author_hasSessionKeys: (p) => {
      const bytes = asHex(p[0], "sessionKeys");
      if (bytes.length === 0 || bytes.length % 32 !== 0)
        throw new RpcError(1004, "Session keys are not encoded correctly");
      const have = new Set(keystore.map((k) => k.publicKey));
      for (let i = 0; i < bytes.length; i += 32)
        if (!have.has(toHex(bytes.subarray(i, i + 32)))) return false;
      return true;
    },
  };

  /** Runs one request object; returns the response object or null for a notification. */
  const handle = (req: unknown, ws: WebSocket | null): object | null => {
    if (typeof req !== "object" || req === null || Array.isArray(req))
      return { jsonrpc: "2.0", error: { code: -32600, message: "Invalid request" }, id: null };
    const r = req as { jsonrpc?: unknown; method?: unknown; params?: unknown; id?: unknown };
    const hasId = "id" in r;
    const id = hasId ? (r.id as string | number | null) : null;
    if (r.jsonrpc !== "2.0" || typeof r.method !== "string")
      return { jsonrpc: "2.0", error: { code: -32600, message: "Invalid request" }, id };
    const method = r.method;
    counts[method] = (counts[method] ?? 0) + 1;
    const params = r.params === undefined || r.params === null ? [] : r.params;
    try {
      if (!Array.isArray(params)) throw invalidParams("positional params (array) expected");
      let result: unknown;
      if (UNSAFE_METHODS.has(method) && !unsafeAllowed) throw UNSAFE();
      const sub = SUBSCRIBE[method];
      const unsub = UNSUBSCRIBE[method];
      if (sub) {
        if (!ws) throw METHOD_NOT_FOUND(); // subscriptions need a WebSocket, as on jsonrpsee's HTTP server
        if (
          method === "state_subscribeStorage" &&
          (params[0] === undefined || params[0] === null) &&
          !unsafeAllowed
        )
          throw UNSAFE();
        const s: Subscription = { id: subscriptionId(), kind: sub.kind, notify: sub.notify, ws };
        if (sub.kind === "storage") {
          if (params[0] !== undefined && params[0] !== null && !Array.isArray(params[0]))
            throw invalidParams("array of storage keys expected");
          s.keys = Array.isArray(params[0]) ? params[0].map((k) => toHex(asHex(k, "key"))) : null;
        }
        let tx: PoolTx | undefined;
        if (sub.kind === "extrinsic") tx = submit(params);
        subs.set(s.id, s);
        result = s.id;
        if (hasId) ws.send(JSON.stringify({ jsonrpc: "2.0", result, id }));
        // Initial notifications, as the real node sends right after subscribing.
        if (sub.kind === "newHead") notify(s, header(best));
        if (sub.kind === "finalizedHead") notify(s, header(finalized()));
        if (sub.kind === "runtimeVersion") notify(s, runtimeVersion);
        if (sub.kind === "storage") notify(s, { block: blockHash(best), changes: storageChanges(s, true) });
        if (tx) {
          tx.watchers.push(s);
          notify(s, "ready");
        }
        return null; // already sent, so the initial notifications follow the subscription id
      }
      if (unsub) {
        if (!ws) throw METHOD_NOT_FOUND();
        const s = subs.get(String(params[0]));
        result = s !== undefined && s.ws === ws && s.kind === unsub;
        if (result) subs.delete(String(params[0]));
      } else {
        const fn = methods[method] ?? testMethods[method];
        if (!fn) throw METHOD_NOT_FOUND();
        result = fn(params);
      }
      return hasId ? { jsonrpc: "2.0", result: result === undefined ? null : result, id } : null;
    } catch (e) {
      if (!hasId) return null;
      if (e instanceof RpcError) {
        const error: { code: number; message: string; data?: unknown } = { code: e.code, message: e.message };
        if (e.data !== undefined) error.data = e.data;
        return { jsonrpc: "2.0", error, id };
      }
      return { jsonrpc: "2.0", error: { code: -32603, message: "Internal error", data: String(e) }, id };
    }
  };

  /** A raw message (HTTP body or WS text); returns the serialized response or null (nothing to send). */
  const handleRaw = (raw: string, ws: WebSocket | null): string | null => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return JSON.stringify({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null });
    }
    if (Array.isArray(parsed)) {
      if (parsed.length === 0)
        return JSON.stringify({
          jsonrpc: "2.0",
          error: { code: -32600, message: "Invalid request" },
          id: null,
        });
      const out = parsed.map((r) => handle(r, ws)).filter((r) => r !== null);
      return out.length === 0 ? null : JSON.stringify(out);
    }
    const one = handle(parsed, ws);
    return one === null ? null : JSON.stringify(one);
  };

  // ------------------------------------------------------------------ transport
  const onHttp = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && (path === "/health" || path === "/health/readiness")) {
      const h = health();
      if (path === "/health") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(h));
      } else {
        const ready = !h.isSyncing && (h.peers > 0 || !h.shouldHavePeers);
        res.writeHead(ready ? 200 : 500).end();
      }
      return;
    }
    if (req.method !== "POST") {
      res
        .writeHead(405, { "content-type": "text/plain" })
        .end("Used HTTP Method is not allowed. POST is required");
      return;
    }
    if (!(req.headers["content-type"] ?? "").toLowerCase().startsWith("application/json")) {
      res
        .writeHead(415, { "content-type": "text/plain" })
        .end("Supplied content type is not allowed. Content-Type: application/json is required");
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const out = handleRaw(Buffer.concat(chunks).toString("utf8"), null);
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" }).end(out ?? "");
    });
  };

  const server: Server = createServer(onHttp);
  server.keepAliveTimeout = 60_000;
  const wss = new WebSocketServer({ server, maxPayload: 15 * 1024 * 1024 });
  wss.on("connection", (ws) => {
    ws.on("message", (data, isBinary) => {
      const out = handleRaw(isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString(), ws);
      if (out !== null && ws.readyState === ws.OPEN) ws.send(out);
    });
    ws.on("close", () => {
      for (const [id, s] of subs) if (s.ws === ws) subs.delete(id);
    });
    ws.on("error", () => {});
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;

  let closed = false;
  return {
    httpUrl: `http://${urlHost}:${port}`,
    wsUrl: `ws://${urlHost}:${port}`,
    port,
    effectiveRpcMethods: unsafeAllowed ? "Unsafe" : "Safe",
    async close() {
      if (closed) return;
      closed = true;
      if (blockTimer) clearInterval(blockTimer);
      clearInterval(syncTimer);
      if (saveTimer) clearTimeout(saveTimer);
      save();
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    bestNumber: () => best,
    finalizedNumber: finalized,
    networkHead: () => networkHead,
    isSyncing: syncing,
    blockHash,
    produceBlocks,
    fallBehind(n: number) {
      networkHead += n;
    },
    setSyncPaused(paused: boolean) {
      syncPaused = paused;
    },
    syncRounds: () => syncRounds,
    setPeers(n: number) {
      peers = n;
    },
    setValidatorCandidates,
    setActiveSet,
    setSessionNextKeys,
    setStorage,
    setRuntimeVersion,
    keystore: () => keystore.map((k) => ({ ...k })),
    requestCounts: () => ({ ...counts }),
    setAccountNextIndex: (account, index) => {
      nextIndex.set(account, index);
    },
    wsConnections: () => wss.clients.size,
  };
}
