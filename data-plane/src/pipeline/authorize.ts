import type ipaddr from "ipaddr.js";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { NodeRecord } from "../../../shared/src/redis/records";
import { ipBucket } from "../allowlist/ip";
import type { JwtCheck, JwtVerifier } from "../auth/jwt";
import type { KeyVerifier, VerifiedKey, VerifyResult } from "../auth/key-verifier";
import { type MethodPolicy, reachMessage, reachRefusal, SafeModeMethodPolicy } from "../policy/method-policy";
import type { EndpointStage, PipelineDeps } from "./request";

/**
 * The authorizers every transport uses: an app's key (key, allowlist, User-Agent, JWT), the public
 * endpoint (nothing to check: the client's address is its identity, see admit.ts) and a dedicated node's
 * own key (Safe / Unsafe). A transport reads the credentials its own way (HTTP headers while the body
 * streams, a WebSocket upgrade once, a node key in the path) and hands them here.
 */

/** A refused key check: the row, a more specific message, and for throttles `Retry-After` and the limit. */
export interface KeyRefusal {
  readonly row: ErrorRow;
  readonly message?: string;
  readonly retryAfterMs?: number;
  readonly limit?: number;
}

/**
 * Passed: undefined, or, when the app requires a JWT, the token's `exp` (epoch ms; a WebSocket session
 * closes then). Refused: the refusal. (No object is made for a pass: this runs on every request.)
 */
export type KeyChecked = KeyRefusal | number | undefined;

/**
 * The credentials of a request on an app endpoint, besides the key: read from the request by its
 * transport (the HTTP exchange itself, a WebSocket upgrade's copy), asked only when a rule needs them.
 */
export interface AppCredentials {
  readonly origin: string;
  /** `User-Agent` ("" when absent or not read). */
  readonly userAgent: string;
  /** The JWT offered ("" when none). */
  jwtToken(): string;
  /** The client's address (X-Forwarded-For only from TRUSTED_PROXIES); undefined when not known. */
  clientAddress(): ipaddr.IPv4 | ipaddr.IPv6 | undefined;
}

export function isRefusal(c: KeyChecked): c is KeyRefusal {
  return typeof c === "object";
}

/**
 * The app key's checks once the key is looked up (`v`): the key is an app's, the origin or address is on
 * its allowlist, the User-Agent matches its patterns, its JWT is valid. Synchronous unless a JWT must be
 * verified (not cached); a key without rules costs no allocation.
 */
export function checkAppKey(
  jwt: JwtVerifier,
  v: VerifyResult,
  creds: AppCredentials,
): KeyChecked | Promise<KeyChecked> {
  if (!v.ok)
    return v.retryAfterMs === undefined ? { row: v.error } : { row: v.error, retryAfterMs: v.retryAfterMs };
  const key = v.key;
  if (key.record.kind !== "app") return UNKNOWN_KEY;
  if (!key.allowlist.empty) {
    const refused = key.allowlist.check(creds.origin, () => creds.clientAddress());
    if (refused !== undefined) return { row: refused };
  }
  const access = key.access;
  if (access === undefined || !access.readsHeaders) return undefined;
  const uaRefused = access.userAgentRefusal(creds.userAgent);
  if (uaRefused !== undefined) return { row: uaRefused };
  if (access.jwt === undefined) return undefined;
  const c = jwt.check(
    access.jwt,
    key.record.appId ?? key.hash,
    creds.jwtToken(),
    ipBucket(creds.clientAddress()),
  );
  return c instanceof Promise ? c.then(jwtChecked) : jwtChecked(c);
}

const UNKNOWN_KEY: KeyRefusal = Object.freeze({ row: GatewayError.UnknownKey });

function jwtChecked(c: JwtCheck): KeyChecked {
  if (c.ok) return c.expiresAtMs;
  if (c.retryAfterMs === undefined) return { row: c.row, message: c.message };
  return { row: c.row, message: c.message, retryAfterMs: c.retryAfterMs, limit: c.limit ?? 0 };
}

// ---- dedicated-node keys ----

/** Where the node-key authorizer reads node records (nodes/node-directory.ts). */
export interface NodeRecords {
  get(nodeId: string): NodeRecord | null | Promise<NodeRecord | null>;
}

export type NodeAuthResult =
  | { ok: true; key: VerifiedKey; node: NodeRecord }
  | { ok: false; error: ErrorRow; retryAfterMs?: number; limit?: number };

/** Only the node's own key opens its endpoint (an app key, or another node's key, is 401). */
export async function authorizeNodeKey(
  verifier: KeyVerifier,
  nodes: NodeRecords,
  nodeId: string,
  apiKey: string,
  /** The client's address bucket, asked only when the key must be read from Redis (throttle). */
  client?: () => string | undefined,
): Promise<NodeAuthResult> {
  if (apiKey === "") return { ok: false, error: GatewayError.MissingKey };
  let v = verifier.verify(apiKey, Date.now(), client);
  if (v instanceof Promise) v = await v;
  if (!v.ok) return { ok: false, error: v.error, retryAfterMs: v.retryAfterMs };
  if (v.key.record.kind !== "node" || v.key.record.nodeId !== nodeId) {
    return { ok: false, error: GatewayError.UnknownKey };
  }
  let node: NodeRecord | null;
  try {
    const n = nodes.get(nodeId);
    node = n instanceof Promise ? await n : n;
  } catch {
    return { ok: false, error: GatewayError.Internal };
  }
  if (node === null) return { ok: false, error: GatewayError.NodeUnavailable };
  return { ok: true, key: v.key, node };
}

/**
 * A dedicated node's endpoint as the transports see it: the node-key authorizer, and the stage between
 * admission and forwarding (the node's state and pool, Safe mode; nodes/node-gateway.ts).
 */
export interface NodeEndpoint {
  authorize(nodeId: string, apiKey: string, client?: () => string | undefined): Promise<NodeAuthResult>;
  /** Whether the node forwards now (SYNCED, with a URL): a WebSocket upgrade to one that does not is refused. */
  serving(node: NodeRecord): boolean;
  readonly stage: EndpointStage;
  /** The pipeline's sinks and the forwarding core a node's requests use (no pool-wide calls: one node). */
  readonly deps: PipelineDeps;
}

/** Methods refused by a node whose rpc-methods is Safe (what a real node refuses, plus account methods). */
const safePolicy = new SafeModeMethodPolicy();

export function safeModeBlocked(method: string): string | undefined {
  return safePolicy.refusal(method) === undefined
    ? undefined
    : `${method} is not available: this dedicated node's rpc-methods is Safe; switch it to Unsafe to call it`;
}

/** Refused in both modes: methods that reach past the node (a fork URL, a peer, a listener, host files). */
function reachBlocked(method: string, params: unknown): string | undefined {
  const why = reachRefusal(method, params);
  return why === undefined ? undefined : reachMessage(method, why);
}

/** A node key's Safe mode as the forwarding core's method policy. */
const SAFE_MODE: MethodPolicy = {
  check: (method, _network, params) => reachBlocked(method, params) ?? safeModeBlocked(method),
};
/** Unsafe: the node serves everything its owner asks of it that stays within the node. */
const UNSAFE_MODE: MethodPolicy = { check: (method, _network, params) => reachBlocked(method, params) };

/** The method policy of a node key (read per request: switching the node to Safe applies at once). */
export function nodeKeyPolicy(key: VerifiedKey): MethodPolicy {
  return key.record.rpcMethods !== "UNSAFE" ? SAFE_MODE : UNSAFE_MODE;
}
