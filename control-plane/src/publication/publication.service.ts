import { DataSource } from "typeorm";
import { Logger } from "../../../shared/src/log/logger";
import { type RedisClient, scanKeys } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import {
  AccessRecord,
  hasAccessRules,
  KeyRecord,
  KeyRecordSchema,
  NetworkRecord,
  NetworkRecordSchema,
  NodeRecord,
  NodeRecordSchema,
  PlaneEvent,
  PlanLimits,
  WorkspaceRecord,
} from "../../../shared/src/redis/records";
import { SlotTransactions } from "../../../shared/src/redis/slot-transactions";
import { MethodCost } from "../compute-units/method-cost.entity";
import { resolveMethodCosts } from "../compute-units/resolve";

/** A plan's columns as every published record carries them (PlanLimits), from `plans p`. */
interface PlanRow extends PlanCuRow {
  plan_name: string;
  daily_request_limit: string;
  requests_per_second: number;
  monthly_request_limit: string | null;
  max_in_flight_per_key: number | null;
  max_heavy_in_flight_per_key: number | null;
}

const PLAN_COLUMNS = `p.name AS plan_name, p.daily_request_limit, p.requests_per_second, p.monthly_request_limit,
         p.max_in_flight_per_key, p.max_heavy_in_flight_per_key,
         p.compute_units_per_second, p.daily_compute_unit_limit, p.monthly_compute_unit_limit`;

interface LiveKeyRow extends PlanRow {
  key_hash: string;
  expires_at: Date | null;
  app_id: string;
  workspace_id: string;
}

interface WorkspacePlanRow extends PlanRow {
  workspace_id: string;
}

/** The plan columns of those rows beyond requests (node-postgres returns bigint as a string). */
interface PlanCuRow {
  compute_units_per_second: number | null;
  daily_compute_unit_limit: string | null;
  monthly_compute_unit_limit: string | null;
}

const LIVE_KEYS_SQL = `
  SELECT k.key_hash, k.expires_at, a.id AS app_id, a.workspace_id, ${PLAN_COLUMNS}
  FROM api_keys k
  JOIN apps a ON a.id = k.app_id
  JOIN workspaces w ON w.id = a.workspace_id
  JOIN plans p ON p.id = w.plan_id
  WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`;

/** Live dedicated-node keys (a node's key works until the node is being deleted). */
const NODE_KEYS_SQL = `
  SELECT n.id AS node_id, n.key_hash, n.rpc_methods, n.workspace_id, n.status, n.internal_http_url,
         n.internal_ws_url, nw.protocol, ${PLAN_COLUMNS}
  FROM dedicated_nodes n
  JOIN networks nw ON nw.id = n.network_id
  JOIN workspaces w ON w.id = n.workspace_id
  JOIN plans p ON p.id = w.plan_id
  WHERE n.status NOT IN ('DELETING', 'DELETED')`;

interface NodeKeyRow extends PlanRow {
  node_id: string;
  key_hash: string;
  rpc_methods: "SAFE" | "UNSAFE";
  workspace_id: string;
  status: string;
  internal_http_url: string | null;
  internal_ws_url: string | null;
  protocol: "EVM" | "SUBSTRATE";
}

function planLimits(row: PlanRow): PlanLimits {
  const num = (v: string | null) => (v === null ? null : Number(v));
  const limits: PlanLimits = {
    name: row.plan_name,
    dailyRequestLimit: Number(row.daily_request_limit),
    requestsPerSecond: row.requests_per_second,
    monthlyRequestLimit: num(row.monthly_request_limit),
    maxInFlightPerKey: row.max_in_flight_per_key,
    maxHeavyInFlightPerKey: row.max_heavy_in_flight_per_key,
  };
  // Compute-unit limits only where the plan sets them: a requests-only plan's records stay as they were.
  if (row.compute_units_per_second !== null) limits.computeUnitsPerSecond = row.compute_units_per_second;
  if (row.daily_compute_unit_limit !== null) limits.dailyComputeUnitLimit = num(row.daily_compute_unit_limit);
  if (row.monthly_compute_unit_limit !== null)
    limits.monthlyComputeUnitLimit = num(row.monthly_compute_unit_limit);
  return limits;
}

export interface PublicationRetryOptions {
  /** First wait before the re-publish that repairs a failed publication, ms; doubles after each failure. */
  minMs: number;
  /** Longest wait between two attempts, ms. */
  maxMs: number;
  /**
   * On each reconnect, check the publication marker and re-publish when it is gone (Redis restarted
   * empty), so that repair does not depend on the worker alone. Off by default: the worker has its own
   * RedisRecoveryService.
   */
  repairLostMarker?: boolean;
}

export interface RepublishResult {
  keys: number;
  staleKeysRemoved: number;
  workspaces: number;
  networks: number;
  plans: number;
}

/**
 * Writes what the data plane reads (shared/src/redis/records.ts) under the RedisNames keys, after the
 * Postgres change is committed, and announces it on the events channel. The PUBLISH of the matching event
 * follows the writes (one MULTI on a single Redis, one per slot then the PUBLISH on a Redis Cluster: see
 * SlotTransactions), so a subscriber that reacts to an event always reads the new state.
 *
 * Publication failures (Redis down) are logged and do not fail the mutation that was already committed.
 * Postgres is the source of truth, so a failed step is not replayed: Redis is marked dirty and a full
 * re-publish from Postgres is retried with backoff until one lands (see `retryLater`). It covers every
 * failed step at once (stale key records are found by SCAN and deleted, then `resync` makes data planes
 * drop their caches), so a key regenerated or deleted during a Redis blip stops working within one retry
 * interval of Redis coming back. The worker's periodic full re-publish stays the backstop across processes.
 */
export class PublicationService {
  constructor(
    readonly dataSource: DataSource,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly log: Logger,
    private readonly retry: PublicationRetryOptions = { minMs: 250, maxMs: 5_000 },
  ) {
    redis.on("close", () => {
      this.lostConnection = true;
    });
    redis.on("ready", () => {
      const reconnected = this.lostConnection;
      this.lostConnection = false;
      if (this.stopped) return;
      if (this.dirty && this.retryTimer !== undefined) {
        // Redis is back: repair now instead of at the end of a backoff that grew while it was down.
        clearTimeout(this.retryTimer);
        this.retryTimer = undefined;
        this.retryDelayMs = 0;
        this.retryLater(0);
      } else if (reconnected && this.retry.repairLostMarker) {
        void this.repairIfMarkerLost();
      }
    });
  }

  /** Re-publishes in full (retried until it lands) when the publication marker is gone. */
  private async repairIfMarkerLost(): Promise<void> {
    let present: boolean;
    try {
      present = (await this.redis.exists(this.names.publishedAt())) === 1;
    } catch {
      return; // lost again: the next "ready" checks
    }
    if (present || this.stopped) return;
    this.log.warn("redis holds no publication marker (restarted empty?): re-publishing from Postgres");
    this.retryDelayMs = 0;
    this.retryLater(0);
  }

  private queue: Promise<unknown> = Promise.resolve();
  /** A publication failed and no full re-publish has landed since. */
  private dirty = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelayMs = 0;
  private retryRoundsRun = 0;

  /** Retry timer rounds run so far (each either waited for Redis or attempted a re-publish). */
  get retryRounds(): number {
    return this.retryRoundsRun;
  }
  private stopped = false;
  /** The connection closed since its last "ready". */
  private lostConnection = false;

  /** True while a failed publication waits for its re-publish (for tests and diagnostics). */
  get pendingRetry(): boolean {
    return this.dirty;
  }

  /** Stops retrying (process shutdown). Whatever is still dirty is repaired by the next publisher. */
  stop(): void {
    this.stopped = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  /**
   * Schedules a full re-publish after the current backoff (min, doubling to max; `delayMs` overrides the
   * wait). One timer at a time: failures while one is pending share it.
   */
  private retryLater(delayMs?: number): void {
    this.dirty = true;
    if (this.stopped || this.retryTimer !== undefined) return;
    this.retryDelayMs =
      this.retryDelayMs === 0 ? this.retry.minMs : Math.min(this.retry.maxMs, this.retryDelayMs * 2);
    const wait = delayMs ?? this.retryDelayMs;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.stopped) return;
      this.retryRoundsRun++;
      // Redis is still away: an attempt would read every key, workspace, network and plan from Postgres
      // only to fail on the first write. Wait instead; the "ready" handler runs the attempt at once.
      if (this.redis.status !== "ready") {
        this.retryLater();
        return;
      }
      // Cleared before the attempt: a step failing meanwhile sets it again and schedules the next one.
      this.dirty = false;
      this.republishAllSerial().then(
        (res) => {
          if (this.dirty) return;
          this.retryDelayMs = 0;
          this.log.info({ ...res }, "re-published to Redis after a failed publication");
        },
        (err: Error) => {
          this.log.warn({ err: err.message, retryInMs: this.retryDelayMs }, "re-publish failed; retrying");
          this.retryLater();
        },
      );
    }, wait);
    this.retryTimer.unref();
  }

  /**
   * Runs a publication step after the change is committed; logs instead of throwing (the committed change
   * stands). Steps of this process run one at a time, each reading Postgres then writing Redis, so a
   * slower, older snapshot can never overwrite a newer one. (Across several control-plane processes the
   * periodic full re-publish is the backstop.)
   */
  safely(what: string, fn: () => Promise<unknown>): Promise<void> {
    const run = this.queue.then(fn).then(
      () => undefined,
      (err) => {
        this.log.error(
          { err, what },
          "publication to Redis failed; re-publishing from Postgres until it lands",
        );
        this.retryLater();
      },
    );
    this.queue = run;
    return run;
  }

  /** Full re-publish, queued behind (and ahead of) this process's other publication steps. */
  republishAllSerial(): Promise<RepublishResult> {
    const run = this.queue.then(() => this.republishAll());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private event(e: PlaneEvent): string {
    return JSON.stringify(e);
  }

  private async loadAllowlists(appIds: string[]): Promise<Map<string, KeyRecord["allowlist"]>> {
    const out = new Map<string, KeyRecord["allowlist"]>();
    for (const id of appIds) out.set(id, { origins: [], ips: [] });
    if (appIds.length === 0) return out;
    const rows: { app_id: string; kind: string; value: string }[] = await this.dataSource.query(
      "SELECT app_id, kind, value FROM allowlist_entries WHERE app_id = ANY($1::uuid[]) ORDER BY created_at, id",
      [appIds],
    );
    for (const r of rows) {
      const list = out.get(r.app_id);
      if (!list) continue;
      if (r.kind === "ORIGIN") list.origins.push(r.value);
      else list.ips.push(r.value);
    }
    return out;
  }

  /**
   * The apps' access rules as published (`KeyRecord.access`); apps without rules are absent (published as
   * null). JWT settings are published only while the app requires JWTs.
   */
  private async loadAccess(appIds: string[]): Promise<Map<string, AccessRecord>> {
    const out = new Map<string, AccessRecord>();
    if (appIds.length === 0) return out;
    const rules: {
      app_id: string;
      method_mode: "ALLOW" | "DENY";
      methods: string[];
      requests_per_second: number | null;
      compute_units_per_second: number | null;
      requests_per_day: number | null;
      user_agents: string[];
      jwt_required: boolean;
      jwt_audience: string | null;
      jwt_subject: string | null;
    }[] = await this.dataSource.query(
      `SELECT app_id, method_mode, methods, requests_per_second, compute_units_per_second, requests_per_day,
              user_agents, jwt_required,
              jwt_audience, jwt_subject
       FROM app_access_rules WHERE app_id = ANY($1::uuid[])`,
      [appIds],
    );
    const required = rules.filter((r) => r.jwt_required).map((r) => r.app_id);
    const keys: { app_id: string; kid: string; algorithm: "RS256" | "ES256"; jwk: Record<string, string> }[] =
      required.length === 0
        ? []
        : await this.dataSource.query(
            "SELECT app_id, kid, algorithm, jwk FROM app_jwt_keys WHERE app_id = ANY($1::uuid[]) ORDER BY created_at, id",
            [required],
          );
    for (const r of rules) {
      const rec: AccessRecord = {
        methodMode: r.method_mode,
        methods: r.methods,
        requestsPerSecond: r.requests_per_second,
        requestsPerDay: r.requests_per_day,
        // Absent when unset: records of apps without the cap stay as they were.
        ...(r.compute_units_per_second === null ? {} : { computeUnitsPerSecond: r.compute_units_per_second }),
        userAgents: r.user_agents,
        jwt: r.jwt_required
          ? {
              keys: keys
                .filter((k) => k.app_id === r.app_id)
                .map((k) => ({ kid: k.kid, alg: k.algorithm, jwk: k.jwk })),
              audience: r.jwt_audience,
              subject: r.jwt_subject,
            }
          : null,
      };
      if (hasAccessRules(rec)) out.set(r.app_id, rec);
    }
    return out;
  }

  private async buildKeyRecords(where: string, params: unknown[]): Promise<Map<string, KeyRecord>> {
    const rows: LiveKeyRow[] = await this.dataSource.query(`${LIVE_KEYS_SQL} AND ${where}`, params);
    const appIds = [...new Set(rows.map((r) => r.app_id))];
    const allowlists = await this.loadAllowlists(appIds);
    const access = await this.loadAccess(appIds);
    const out = new Map<string, KeyRecord>();
    for (const r of rows) {
      const rec: KeyRecord = {
        kind: "app",
        workspaceId: r.workspace_id,
        appId: r.app_id,
        nodeId: null,
        plan: planLimits(r),
        allowlist: allowlists.get(r.app_id) ?? { origins: [], ips: [] },
        expiresAtMs: r.expires_at ? r.expires_at.getTime() : null,
        rpcMethods: null,
        access: access.get(r.app_id) ?? null,
      };
      out.set(r.key_hash, KeyRecordSchema.parse(rec));
    }
    return out;
  }

  /** Key records and node records of live dedicated nodes matching `where` (alias `n`). */
  private async buildNodeRecords(
    where: string,
    params: unknown[],
  ): Promise<{ keys: Map<string, KeyRecord>; nodes: NodeRecord[] }> {
    const rows: NodeKeyRow[] = await this.dataSource.query(`${NODE_KEYS_SQL} AND ${where}`, params);
    const keys = new Map<string, KeyRecord>();
    const nodes: NodeRecord[] = [];
    for (const r of rows) {
      keys.set(
        r.key_hash,
        KeyRecordSchema.parse({
          kind: "node",
          workspaceId: r.workspace_id,
          appId: null,
          nodeId: r.node_id,
          plan: planLimits(r),
          allowlist: { origins: [], ips: [] },
          expiresAtMs: null,
          rpcMethods: r.rpc_methods,
        } satisfies KeyRecord),
      );
      nodes.push(
        NodeRecordSchema.parse({
          nodeId: r.node_id,
          workspaceId: r.workspace_id,
          protocol: r.protocol,
          httpUrl: r.internal_http_url,
          wsUrl: r.internal_ws_url,
          status: r.status,
        } satisfies NodeRecord),
      );
    }
    return { keys, nodes };
  }

  /**
   * Dedicated nodes changed: rewrites the key record and node record of each live node in `nodeIds`
   * (`key.upsert`, `node.update`), deletes `revokedKeyHashes` (`key.revoke`) and the node records of nodes
   * no longer live (deleting / deleted).
   */
  async publishNodes(nodeIds: string[], revokedKeyHashes: string[] = []): Promise<void> {
    const { keys, nodes } =
      nodeIds.length > 0
        ? await this.buildNodeRecords("n.id = ANY($1::uuid[])", [nodeIds])
        : { keys: new Map<string, KeyRecord>(), nodes: [] };
    const live = new Set(nodes.map((n) => n.nodeId));
    const tx = new SlotTransactions(this.redis);
    this.queueKeyWrites(tx, keys);
    for (const n of nodes) this.set(tx, this.names.node(n.nodeId), JSON.stringify(n));
    for (const id of nodeIds) if (!live.has(id)) this.del(tx, this.names.node(id));
    for (const hash of revokedKeyHashes) this.del(tx, this.names.apiKey(hash));
    for (const hash of keys.keys()) {
      tx.publish(this.names.eventsChannel(), this.event({ type: "key.upsert", keyHash: hash }));
    }
    for (const hash of revokedKeyHashes) {
      tx.publish(this.names.eventsChannel(), this.event({ type: "key.revoke", keyHash: hash }));
    }
    for (const id of nodeIds) {
      tx.publish(this.names.eventsChannel(), this.event({ type: "node.update", nodeId: id }));
    }
    await tx.exec();
  }

  private set(tx: SlotTransactions, key: string, value: string): void {
    tx.write(key, (m) => m.set(key, value));
  }

  private del(tx: SlotTransactions, key: string): void {
    tx.write(key, (m) => m.del(key));
  }

  /** Key record and its expiry in one step (one key: atomic on a cluster too). */
  private queueKeyWrites(tx: SlotTransactions, records: Map<string, KeyRecord>): void {
    for (const [hash, rec] of records) {
      const key = this.names.apiKey(hash);
      const value = JSON.stringify(rec);
      tx.write(key, (m) => {
        m.set(key, value);
        if (rec.expiresAtMs !== null) m.pexpireat(key, rec.expiresAtMs);
      });
    }
  }

  /** Replaces a whole hash (one key: readers see the old or the new one, never an empty or half one). */
  private replaceHash(tx: SlotTransactions, key: string, fields: [field: string, value: string][]): void {
    tx.write(key, (m) => {
      m.del(key);
      for (const [f, v] of fields) m.hset(key, f, v);
    });
  }

  /**
   * Key changes of some apps: rewrites every live key record of `appIds` (announced as `key.upsert`) and
   * deletes `revokedKeyHashes` (announced as `key.revoke`).
   */
  async publishKeys(appIds: string[], revokedKeyHashes: string[] = []): Promise<void> {
    const records =
      appIds.length > 0 ? await this.buildKeyRecords("a.id = ANY($1::uuid[])", [appIds]) : new Map();
    const tx = new SlotTransactions(this.redis);
    this.queueKeyWrites(tx, records);
    for (const hash of revokedKeyHashes) this.del(tx, this.names.apiKey(hash));
    for (const hash of records.keys()) {
      tx.publish(this.names.eventsChannel(), this.event({ type: "key.upsert", keyHash: hash }));
    }
    for (const hash of revokedKeyHashes) {
      tx.publish(this.names.eventsChannel(), this.event({ type: "key.revoke", keyHash: hash }));
    }
    await tx.exec();
  }

  private async loadWorkspacePlans(where: string, params: unknown[]): Promise<WorkspaceRecord[]> {
    const rows: WorkspacePlanRow[] = await this.dataSource.query(
      `SELECT w.id AS workspace_id, ${PLAN_COLUMNS}
       FROM workspaces w JOIN plans p ON p.id = w.plan_id WHERE ${where}`,
      params,
    );
    return rows.map((r) => ({ workspaceId: r.workspace_id, plan: planLimits(r) }));
  }

  /** Plan change: rewrites the WorkspaceRecord and every key record of the workspaces. */
  async publishWorkspaces(workspaceIds: string[]): Promise<void> {
    if (workspaceIds.length === 0) return;
    const wss = await this.loadWorkspacePlans("w.id = ANY($1::uuid[])", [workspaceIds]);
    const records = await this.buildKeyRecords("a.workspace_id = ANY($1::uuid[])", [workspaceIds]);
    const nodeRecords = await this.buildNodeRecords("n.workspace_id = ANY($1::uuid[])", [workspaceIds]);
    for (const [hash, rec] of nodeRecords.keys) records.set(hash, rec);
    const tx = new SlotTransactions(this.redis);
    for (const ws of wss) this.set(tx, this.names.workspace(ws.workspaceId), JSON.stringify(ws));
    this.queueKeyWrites(tx, records);
    for (const ws of wss) {
      tx.publish(
        this.names.eventsChannel(),
        this.event({ type: "workspace.update", workspaceId: ws.workspaceId }),
      );
    }
    await tx.exec();
  }

  /** Workspaces on one plan (after the plan's limits were edited). */
  async publishPlan(planId: string): Promise<void> {
    const rows: { id: string }[] = await this.dataSource.query(
      "SELECT id FROM workspaces WHERE plan_id = $1",
      [planId],
    );
    await this.publishPlans();
    await this.publishWorkspaces(rows.map((r) => r.id));
  }

  private async buildPlans(): Promise<Map<string, PlanLimits>> {
    const rows: WorkspacePlanRow[] = await this.dataSource.query(
      `SELECT '' AS workspace_id, ${PLAN_COLUMNS} FROM plans p`,
    );
    return new Map(rows.map((r) => [r.plan_name, planLimits(r)]));
  }

  async publishPlans(): Promise<void> {
    const plans = await this.buildPlans();
    const tx = new SlotTransactions(this.redis);
    this.replaceHash(tx, this.names.plans(), this.planFields(plans));
    await tx.exec();
  }

  private async buildNetworks(): Promise<NetworkRecord[]> {
    const nets: {
      id: string;
      slug: string;
      name: string;
      protocol: "EVM" | "SUBSTRATE";
      chain_id: number | null;
      allow_debug: boolean;
      max_logs_block_range: number;
      logs_chunk_blocks: number;
    }[] = await this.dataSource.query(
      "SELECT id, slug, name, protocol, chain_id, allow_debug, max_logs_block_range, logs_chunk_blocks FROM networks ORDER BY slug",
    );
    const ups: {
      id: string;
      network_id: string;
      http_url: string;
      ws_url: string | null;
      weight: number;
      archive_mode: string;
      method_families: string[] | null;
      max_requests_per_second: number | null;
    }[] = await this.dataSource.query(
      `SELECT id, network_id, http_url, ws_url, weight, archive_mode, method_families, max_requests_per_second
       FROM upstreams ORDER BY created_at, id`,
    );
    const costs = await this.dataSource.getRepository(MethodCost).find({ order: { method: "ASC" } });
    const platformCosts = costs.filter((c) => c.networkId === null);
    return nets.map((n) =>
      NetworkRecordSchema.parse({
        slug: n.slug,
        name: n.name,
        protocol: n.protocol,
        chainId: n.chain_id,
        allowDebug: n.allow_debug,
        maxLogsBlockRange: n.max_logs_block_range,
        logsChunkBlocks: n.logs_chunk_blocks,
        methodCosts: resolveMethodCosts(
          platformCosts,
          costs.filter((c) => c.networkId === n.id),
        ),
        upstreams: ups
          .filter((u) => u.network_id === n.id)
          .map((u) => ({
            id: u.id,
            httpUrl: u.http_url,
            wsUrl: u.ws_url,
            weight: u.weight,
            archiveMode: u.archive_mode,
            methodFamilies: u.method_families,
            maxRequestsPerSecond: u.max_requests_per_second,
          })),
      }),
    );
  }

  private networkFields(nets: NetworkRecord[]): [string, string][] {
    return nets.map((n) => [n.slug, JSON.stringify(n)]);
  }

  private planFields(plans: Map<string, PlanLimits>): [string, string][] {
    return [...plans].map(([name, p]) => [name, JSON.stringify(p)]);
  }

  /** Replaces the networks hash and announces `networks.update`. */
  async publishNetworks(): Promise<void> {
    const nets = await this.buildNetworks();
    const tx = new SlotTransactions(this.redis);
    this.replaceHash(tx, this.names.networks(), this.networkFields(nets));
    tx.publish(this.names.eventsChannel(), this.event({ type: "networks.update" }));
    await tx.exec();
  }

  /**
   * Rebuilds everything the data plane reads from Postgres: every live key record (stale ones found by
   * SCAN are deleted), every WorkspaceRecord, the networks and plans hashes; then publishes `resync` and
   * sets `publishedAt`.
   */
  async republishAll(): Promise<RepublishResult> {
    const records = await this.buildKeyRecords("TRUE", []);
    const nodeRecords = await this.buildNodeRecords("TRUE", []);
    for (const [hash, rec] of nodeRecords.keys) records.set(hash, rec);
    const wss = await this.loadWorkspacePlans("TRUE", []);
    const nets = await this.buildNetworks();
    const plans = await this.buildPlans();

    // Key records live in every slot: on a cluster, every master is scanned.
    const stale: string[] = [];
    const keyPrefix = this.names.apiKey("");
    await scanKeys(this.redis, this.names.apiKeyPattern(), (keys) => {
      for (const k of keys) if (!records.has(k.slice(keyPrefix.length))) stale.push(k);
    });

    const entries = [...records];
    for (let i = 0; i < entries.length; i += 500) {
      const tx = new SlotTransactions(this.redis);
      this.queueKeyWrites(tx, new Map(entries.slice(i, i + 500)));
      await tx.exec();
    }
    const tx = new SlotTransactions(this.redis);
    for (const k of stale) this.del(tx, k);
    for (const ws of wss) this.set(tx, this.names.workspace(ws.workspaceId), JSON.stringify(ws));
    for (const n of nodeRecords.nodes) this.set(tx, this.names.node(n.nodeId), JSON.stringify(n));
    this.replaceHash(tx, this.names.networks(), this.networkFields(nets));
    this.replaceHash(tx, this.names.plans(), this.planFields(plans));
    // The marker last: its presence says every record above is in Redis.
    const marker = this.names.publishedAt();
    const at = new Date().toISOString();
    tx.last(marker, (m) => m.set(marker, at));
    tx.publish(this.names.eventsChannel(), this.event({ type: "resync" }));
    await tx.exec();
    return {
      keys: records.size,
      staleKeysRemoved: stale.length,
      workspaces: wss.length,
      networks: nets.length,
      plans: plans.size,
    };
  }
}
