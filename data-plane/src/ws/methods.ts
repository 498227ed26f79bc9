import { randomBytes } from "node:crypto";

/** How the gateway handles one subscribe method. */
export interface SubscribeSpec {
  /** The family: unsubscribe methods of the same family end it. */
  readonly family: string;
  /** Identical subscriptions share one upstream subscription (false: one per client, e.g. extrinsic watches). */
  readonly merged: boolean;
  /** Replay the last notification to a client joining a merged subscription (Substrate sends the current value on subscribe). */
  readonly replayLast: boolean;
  /** EVM ids are 0x + 16 random bytes; Substrate ids are strings. */
  readonly evm: boolean;
}

const evm = (family: string): SubscribeSpec => ({ family, merged: true, replayLast: false, evm: true });
const sub = (family: string, merged = true): SubscribeSpec => ({
  family,
  merged,
  replayLast: merged,
  evm: false,
});

/** Subscribe methods (EVM and Substrate, with their aliases). */
export const SUBSCRIBE: ReadonlyMap<string, SubscribeSpec> = new Map([
  ["eth_subscribe", evm("eth")],
  ["chain_subscribeNewHeads", sub("newHead")],
  ["chain_subscribeNewHead", sub("newHead")],
  ["subscribe_newHead", sub("newHead")],
  ["chain_subscribeFinalizedHeads", sub("finalizedHead")],
  ["chain_subscribeFinalisedHeads", sub("finalizedHead")],
  ["chain_subscribeAllHeads", sub("allHead")],
  ["state_subscribeStorage", sub("storage")],
  ["state_subscribeRuntimeVersion", sub("runtimeVersion")],
  ["chain_subscribeRuntimeVersion", sub("runtimeVersion")],
  ["author_submitAndWatchExtrinsic", sub("extrinsic", false)],
]);

/** Unsubscribe method -> family. */
export const UNSUBSCRIBE: ReadonlyMap<string, string> = new Map([
  ["eth_unsubscribe", "eth"],
  ["chain_unsubscribeNewHeads", "newHead"],
  ["chain_unsubscribeNewHead", "newHead"],
  ["unsubscribe_newHead", "newHead"],
  ["chain_unsubscribeFinalizedHeads", "finalizedHead"],
  ["chain_unsubscribeFinalisedHeads", "finalizedHead"],
  ["chain_unsubscribeAllHeads", "allHead"],
  ["state_unsubscribeStorage", "storage"],
  ["state_unsubscribeRuntimeVersion", "runtimeVersion"],
  ["chain_unsubscribeRuntimeVersion", "runtimeVersion"],
  ["author_unwatchExtrinsic", "extrinsic"],
]);

/** The upstream unsubscribe method for a family (the canonical name every node serves). */
export const FAMILY_UNSUBSCRIBE: Readonly<Record<string, string>> = {
  eth: "eth_unsubscribe",
  newHead: "chain_unsubscribeNewHeads",
  finalizedHead: "chain_unsubscribeFinalizedHeads",
  allHead: "chain_unsubscribeAllHeads",
  storage: "state_unsubscribeStorage",
  runtimeVersion: "state_unsubscribeRuntimeVersion",
  extrinsic: "author_unwatchExtrinsic",
};

export function isSubscriptionMethod(method: string): boolean {
  return SUBSCRIBE.has(method) || UNSUBSCRIBE.has(method);
}

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` params merge. */
export function canonicalJson(v: unknown): string {
  if (v === undefined) return "null";
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
}

/** Pre-drawn randomness: one crypto call per 256 ids. */
let pool = Buffer.alloc(0);
let offset = 0;
function random16(): Buffer {
  if (offset + 16 > pool.length) {
    pool = randomBytes(16 * 256);
    offset = 0;
  }
  const out = pool.subarray(offset, offset + 16);
  offset += 16;
  return out;
}

/** Client-facing subscription id: `0x` + 32 hex digits (EVM) or a 22-character base64url string (Substrate). */
export function newSubscriptionId(evmStyle: boolean): string {
  const b = random16();
  return evmStyle ? `0x${b.toString("hex")}` : b.toString("base64url").slice(0, 22);
}

/**
 * Lower-cases EVM logs filter addresses and topics so equivalent filters merge (hex is case-insensitive).
 */
export function normaliseParams(method: string, params: unknown): unknown {
  if (method !== "eth_subscribe" || !Array.isArray(params) || params[0] !== "logs") return params;
  const lower = (v: unknown): unknown =>
    typeof v === "string" ? v.toLowerCase() : Array.isArray(v) ? v.map(lower) : v;
  const f = params[1];
  if (f === null || typeof f !== "object" || Array.isArray(f)) return params;
  const filter = { ...(f as Record<string, unknown>) };
  if (filter.address !== undefined) filter.address = lower(filter.address);
  if (filter.topics !== undefined) filter.topics = lower(filter.topics);
  return [params[0], filter, ...params.slice(2)];
}
