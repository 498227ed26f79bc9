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
  /**
   * Compute-unit limits (each request object costs its method's weight, see MethodCostsSchema): per second
   * per workspace, per UTC day and per UTC month. null or absent = no limit in compute units (the seed's
   * plans count requests only). Optional so records published before compute units existed still parse.
   */
  computeUnitsPerSecond: z.number().int().positive().nullable().optional(),
  dailyComputeUnitLimit: z.number().int().positive().nullable().optional(),
  monthlyComputeUnitLimit: z.number().int().positive().nullable().optional(),
  /**
   * Calls in flight per app key, and heavy calls (debug_*, trace_*, wide eth_getLogs) in flight per key.
   * null or absent = the data plane's configured default (MAX_IN_FLIGHT_PER_KEY, MAX_HEAVY_IN_FLIGHT_PER_KEY).
   */
  maxInFlightPerKey: z.number().int().positive().nullable().optional(),
  maxHeavyInFlightPerKey: z.number().int().positive().nullable().optional(),
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
  /**
   * The app's own per-second cap in compute units (its request objects' method weights); the plan's
   * `computeUnitsPerSecond` still applies when lower. Null or absent = none.
   */
  computeUnitsPerSecond: z.number().int().positive().nullable().optional(),
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
    (r.computeUnitsPerSecond ?? null) !== null ||
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

/**
 * What the operator says about an upstream's state history (docs/contracts.md#upstream-capabilities):
 * `AUTO` the data plane probes the oldest block whose state it serves; `ARCHIVE` it serves every block's
 * state (never probed); `PRUNED` it keeps a window of recent state that moves with its head (probed for
 * the window's length, never taken for an archive node).
 */
export const UPSTREAM_ARCHIVE_MODES = ["AUTO", "ARCHIVE", "PRUNED"] as const;
export type UpstreamArchiveMode = (typeof UPSTREAM_ARCHIVE_MODES)[number];

/**
 * Method families an upstream may declare it serves: the `debug_*` and `trace_*` namespaces. Once any
 * upstream of a network declares families, a call of a family goes only to upstreams that declare it.
 */
export const UPSTREAM_METHOD_FAMILIES = ["debug", "trace"] as const;
export type UpstreamMethodFamily = (typeof UPSTREAM_METHOD_FAMILIES)[number];

export const UpstreamRecordSchema = z.object({
  id: z.string(),
  httpUrl: z.string(),
  wsUrl: z.string().nullable(),
  /** Relative share of traffic, 1..1000. */
  weight: z.number().int().positive(),
  /** Absent (records published before the setting existed) = AUTO. */
  archiveMode: z.enum(UPSTREAM_ARCHIVE_MODES).optional(),
  /** Families it serves; null, empty or absent = none declared. */
  methodFamilies: z.array(z.enum(UPSTREAM_METHOD_FAMILIES)).nullable().optional(),
  /**
   * Requests (batch elements each count one) per second this upstream should get; past it, other
   * upstreams are chosen first. null or absent = no budget.
   */
  maxRequestsPerSecond: z.number().int().positive().nullable().optional(),
});
export type UpstreamRecord = z.infer<typeof UpstreamRecordSchema>;

/**
 * A network's method weights in compute units, resolved by the control plane (the platform default table
 * overlaid with the network's own overrides): `methods[name]` for a listed method, `defaultUnits` for any
 * other. Weights are whole numbers >= 0 (0 = free).
 */
export const MethodCostsSchema = z.object({
  defaultUnits: z.number().int().min(0),
  methods: z.record(z.string(), z.number().int().min(0)),
});
export type MethodCosts = z.infer<typeof MethodCostsSchema>;

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
  /**
   * eth_getLogs ranges longer than this many blocks are split into sub-ranges of at most this many, sent
   * in parallel across the upstreams and merged (data-plane/src/upstream/logs-split.ts); 0 = never split.
   * Absent (records published before the setting existed): DEFAULT_LOGS_CHUNK_BLOCKS applies (see
   * logsChunkBlocks()).
   */
  logsChunkBlocks: z.number().int().min(0).optional(),
  /** Method weights in compute units. Absent (records published before compute units existed): every method costs 1. */
  methodCosts: MethodCostsSchema.optional(),
});
export type NetworkRecord = z.infer<typeof NetworkRecordSchema>;

/** A network's eth_getLogs block-range limit, with the default for records that do not carry it. */
export function maxLogsBlockRange(n: NetworkRecord): number {
  return n.maxLogsBlockRange ?? DEFAULT_MAX_LOGS_BLOCK_RANGE;
}

/**
 * Default of a network's logsChunkBlocks (the Postgres column default too). 2,000 blocks: Alchemy serves
 * 2K-block ranges with no cap on the result (its range error says so), and the nodes and providers that cap
 * ranges instead (`exceed maximum block range: 5000`, QuickNode's 10,000) allow at least that, so a chunk
 * rarely meets a refusal; small enough that chunks spread over the upstreams, large enough that the default
 * maxLogsBlockRange (10,000) fans out into at most 5 sub-calls.
 */
export const DEFAULT_LOGS_CHUNK_BLOCKS = 2_000;

/** A network's eth_getLogs chunk size, with the default for records that do not carry it. */
export function logsChunkBlocks(n: NetworkRecord): number {
  return n.logsChunkBlocks ?? DEFAULT_LOGS_CHUNK_BLOCKS;
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

/** One upstream as one data-plane instance sees it (HealthRecord). */
export const UpstreamHealthSchema = z.object({
  id: z.string(),
  /** Selectable now: breaker closed, not backing off, not lagging more than HEALTH_MAX_LAG_BLOCKS. */
  healthy: z.boolean(),
  /** Last health-checked head; -1 = unknown. */
  head: z.number().int(),
  /** Blocks behind the network head (>= 0); null when either head is unknown. */
  lagBlocks: z.number().int().nullable(),
  /** EWMA of answer latency, ms. */
  latencyEwmaMs: z.number(),
  /** EWMA of the share of failed exchanges, 0..1. */
  errorRate: z.number(),
  breakerOpen: z.boolean(),
});
export type UpstreamHealth = z.infer<typeof UpstreamHealthSchema>;

/**
 * What one data-plane instance publishes about its upstream pools (RedisNames.upstreamHealth), read by
 * the control plane's operator queries. `atMs`: when it was taken (epoch ms).
 */
export const HealthRecordSchema = z.object({
  instanceId: z.string(),
  atMs: z.number().int(),
  networks: z.array(
    z.object({
      slug: z.string(),
      /** The network head (NetworkPool.bestHead); -1 = unknown. */
      head: z.number().int(),
      upstreams: z.array(UpstreamHealthSchema),
    }),
  ),
});
export type HealthRecord = z.infer<typeof HealthRecordSchema>;
