import { z } from "zod";

/**
 * The shapes the control plane publishes into Redis and the data plane reads
 * (docs/contracts.md#redis-between-the-planes). Both planes parse with these schemas, so a drift fails
 * loudly.
 */

export const PlanLimitsSchema = z.object({
  name: z.string(),
  /** Requests per second per app key; every batch element counts one. */
  requestsPerSecond: z.number().int().positive(),
  /** Response units per workspace per UTC day. */
  dailyRequestLimit: z.number().int().positive(),
  /** Response units per workspace per UTC month; null = no monthly limit. */
  monthlyRequestLimit: z.number().int().positive().nullable(),
});
export type PlanLimits = z.infer<typeof PlanLimitsSchema>;

/** Value of a field in the `plans` hash (field = plan name): the plan's limits. */
export const PlanRecordSchema = PlanLimitsSchema;
export type PlanRecord = PlanLimits;

export const AllowlistSchema = z.object({
  /** Exact origins (`https://app.example.com`) or wildcard hosts (`*.example.com`). */
  origins: z.array(z.string()),
  /** Single addresses or CIDR ranges, IPv4 and IPv6. */
  ips: z.array(z.string()),
});
export type Allowlist = z.infer<typeof AllowlistSchema>;

/** Largest number of JWT public keys an app may register (control plane) and a record may carry. */
export const MAX_JWT_KEYS_PER_APP = 3;

/**
 * One registered JWT public key, as published: the control plane turned the PEM or JWK it was given into a
 * public JWK (no private members) and checked it fits `alg` (RS256: RSA of at least 2048 bits; ES256: EC
 * P-256).
 */
export const JwtKeyRecordSchema = z.object({
  kid: z.string().min(1),
  alg: z.enum(["RS256", "ES256"]),
  /** The public JWK (`kty`, `n`/`e` or `crv`/`x`/`y`; string members only). */
  jwk: z.record(z.string(), z.string()),
});
export type JwtKeyRecord = z.infer<typeof JwtKeyRecordSchema>;

/** An app that requires JWTs: the keys a token may be signed with and the claims it must carry. */
export const JwtRecordSchema = z.object({
  keys: z.array(JwtKeyRecordSchema).max(MAX_JWT_KEYS_PER_APP),
  /** When set, the token's `aud` must be (or contain) it. */
  audience: z.string().nullable(),
  /** When set, the token's `sub` must equal it. */
  subject: z.string().nullable(),
});
export type JwtRecord = z.infer<typeof JwtRecordSchema>;

/**
 * An app's access rules (docs/contracts.md#access-rules). Absent or null on a key record: no rules, which
 * is most apps.
 */
export const AccessRecordSchema = z.object({
  /**
   * `ALLOW`: only `methods` may be called; `DENY`: every method but `methods` (an empty deny-list is no
   * rule). Entries are exact names or `namespace_*` patterns (shared/src/access/patterns.ts), compared
   * case-insensitively.
   */
  methodMode: z.enum(["ALLOW", "DENY"]),
  methods: z.array(z.string()),
  /** The app's own per-second cap; the plan's `requestsPerSecond` still applies when lower. */
  requestsPerSecond: z.number().int().positive().nullable(),
  /** The app's own cap on response units per UTC day (the workspace's daily limit still applies). */
  requestsPerDay: z.number().int().positive().nullable(),
  /** Allowed `User-Agent` glob patterns (`*` = any run of characters); empty = any user agent. */
  userAgents: z.array(z.string()),
  /** Set when the app requires a JWT on every request; null otherwise. */
  jwt: JwtRecordSchema.nullable(),
});
export type AccessRecord = z.infer<typeof AccessRecordSchema>;

/** Whether the rules restrict anything (a DENY mode with nothing listed and no caps is no rule at all). */
export function hasAccessRules(r: AccessRecord): boolean {
  return (
    r.methodMode === "ALLOW" ||
    r.methods.length > 0 ||
    r.requestsPerSecond !== null ||
    r.requestsPerDay !== null ||
    r.userAgents.length > 0 ||
    r.jwt !== null
  );
}

export const KeyRecordSchema = z.object({
  kind: z.enum(["app", "node"]),
  workspaceId: z.string(),
  /** Set when kind = "app". */
  appId: z.string().nullable(),
  /** Set when kind = "node" (dedicated node endpoint key). */
  nodeId: z.string().nullable(),
  plan: PlanLimitsSchema,
  allowlist: AllowlistSchema,
  /** Epoch ms after which the key stops working (a regenerated key's grace period); null = no expiry. */
  expiresAtMs: z.number().int().nullable(),
  /** Dedicated nodes only: "SAFE" refuses unsafe methods on the node endpoint. */
  rpcMethods: z.enum(["SAFE", "UNSAFE"]).nullable(),
  /**
   * App keys: the app's access rules (method allow/deny-list, caps, user agents, JWT); null or absent =
   * none. Optional so records published before the rules existed still parse.
   */
  access: AccessRecordSchema.nullable().optional(),
});
export type KeyRecord = z.infer<typeof KeyRecordSchema>;

export const UpstreamRecordSchema = z.object({
  id: z.string(),
  httpUrl: z.string(),
  wsUrl: z.string().nullable(),
  /** Relative share of traffic, 1..1000. */
  weight: z.number().int().positive(),
});
export type UpstreamRecord = z.infer<typeof UpstreamRecordSchema>;

/** Default of a network's maxLogsBlockRange (the Postgres column default too). */
export const DEFAULT_MAX_LOGS_BLOCK_RANGE = 10_000;

export const NetworkRecordSchema = z.object({
  slug: z.string(),
  name: z.string(),
  protocol: z.enum(["EVM", "SUBSTRATE"]),
  chainId: z.number().int().nullable(),
  /** Whether `debug_*` methods may reach this network's shared nodes. */
  allowDebug: z.boolean(),
  upstreams: z.array(UpstreamRecordSchema),
  /**
   * Most blocks one eth_getLogs (or eth_newFilter) may span; 0 = no limit. Absent (records published
   * before the setting existed): DEFAULT_MAX_LOGS_BLOCK_RANGE applies (see maxLogsBlockRange()).
   */
  maxLogsBlockRange: z.number().int().min(0).optional(),
});
export type NetworkRecord = z.infer<typeof NetworkRecordSchema>;

/** A network's eth_getLogs block-range limit, with the default for records that do not carry it. */
export function maxLogsBlockRange(n: NetworkRecord): number {
  return n.maxLogsBlockRange ?? DEFAULT_MAX_LOGS_BLOCK_RANGE;
}

export const WorkspaceRecordSchema = z.object({
  workspaceId: z.string(),
  plan: PlanLimitsSchema,
});
export type WorkspaceRecord = z.infer<typeof WorkspaceRecordSchema>;

/** Messages on the events channel. Data planes drop or reload the cached state each names. */
export const PlaneEventSchema = z.discriminatedUnion("type", [
  /** A key record was written or changed (allowlist edit, new key). */
  z.object({ type: z.literal("key.upsert"), keyHash: z.string() }),
  /** A key was revoked: it must stop working at once (and WS connections using it close). */
  z.object({ type: z.literal("key.revoke"), keyHash: z.string() }),
  /** A workspace's plan or limits changed: every key record of the workspace was re-written. */
  z.object({ type: z.literal("workspace.update"), workspaceId: z.string() }),
  /** Networks or upstreams changed: reload the networks hash. */
  z.object({ type: z.literal("networks.update") }),
  /** Full re-publish finished: drop every cached record and reload. */
  z.object({ type: z.literal("resync") }),
  /** A dedicated node's record (URL, status) changed or was deleted: drop the cached one. */
  z.object({ type: z.literal("node.update"), nodeId: z.string() }),
]);
export type PlaneEvent = z.infer<typeof PlaneEventSchema>;

/** A dedicated node as the data plane needs it: where to forward and whether it may serve now. */
export const NodeRecordSchema = z.object({
  nodeId: z.string(),
  workspaceId: z.string(),
  protocol: z.enum(["EVM", "SUBSTRATE"]),
  /** Internal RPC URL of the node (the provider's endpoint); null while not provisioned. */
  httpUrl: z.string().nullable(),
  wsUrl: z.string().nullable(),
  /** Node status (PENDING, PROVISIONING, SYNCING, SYNCED, STOPPED, ERROR, DELETING, DELETED). */
  status: z.string(),
});
export type NodeRecord = z.infer<typeof NodeRecordSchema>;

/** Written by the data plane when `author_rotateKeys` succeeded through a node's endpoint. */
export const NodeSessionKeysRecordSchema = z.object({
  nodeId: z.string(),
  /** The hex session keys the node returned. */
  keys: z.string(),
  atMs: z.number().int(),
});
export type NodeSessionKeysRecord = z.infer<typeof NodeSessionKeysRecordSchema>;
