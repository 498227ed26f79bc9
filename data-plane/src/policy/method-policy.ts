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

/** Exact method names that shared nodes never serve. */
const BLOCKED_EXACT = new Map<string, string>([
  ["author_rotateKeys", KEYS],
  ["author_insertKey", KEYS],
  ["author_hasKey", KEYS],
  ["author_hasSessionKeys", KEYS],
  ["author_removeExtrinsic", STATE],
  ["system_addReservedPeer", ADMIN],
  ["system_removeReservedPeer", ADMIN],
  ["system_addLogFilter", ADMIN],
  ["system_resetLogFilter", ADMIN],
  ["eth_sign", ACCOUNTS],
  ["eth_signTransaction", ACCOUNTS],
  ["eth_sendTransaction", ACCOUNTS],
  ["eth_signTypedData", ACCOUNTS],
  ["eth_signTypedData_v3", ACCOUNTS],
  ["eth_signTypedData_v4", ACCOUNTS],
]);

/** `author_*` methods that stay allowed: submitting and watching extrinsics, reading the pool. */
const AUTHOR_ALLOWED = new Set([
  "author_submitExtrinsic",
  "author_submitAndWatchExtrinsic",
  "author_unwatchExtrinsic",
  "author_pendingExtrinsics",
]);

/** Namespaces (text before the first `_`) blocked entirely. */
const BLOCKED_NAMESPACES = new Map<string, string>([
  ["admin", ADMIN],
  ["personal", ACCOUNTS],
  ["miner", ADMIN],
  ["engine", ADMIN],
  ["clique", ADMIN],
  ["offchain", STATE],
  ["sudo", ADMIN],
  ["anvil", DEV],
  ["hardhat", DEV],
  ["evm", DEV],
  ["ganache", DEV],
]);

export function blockedMessage(method: string, why: string): string {
  return `${method} is not available on shared nodes: ${why}; use a dedicated node`;
}

export class SharedNodeMethodPolicy implements MethodPolicy {
  check(method: string, network: NetworkRecord): string | undefined {
    const exact = BLOCKED_EXACT.get(method);
    if (exact !== undefined) return blockedMessage(method, exact);
    const us = method.indexOf("_");
    if (us <= 0) return undefined;
    const ns = method.slice(0, us);
    if (ns === "author") {
      return AUTHOR_ALLOWED.has(method) ? undefined : blockedMessage(method, STATE);
    }
    if (ns === "debug") {
      return network.allowDebug
        ? undefined
        : `${method} is not available on this network's shared nodes: debug methods are disabled; use a dedicated node`;
    }
    const why = BLOCKED_NAMESPACES.get(ns);
    return why === undefined ? undefined : blockedMessage(method, why);
  }
}
