/**
 * Every Redis key and pub/sub channel name used between the planes is built here, and only here.
 *
 * A deployment (or a test run) picks a prefix (`REDIS_KEY_PREFIX`, default `rg:`), so several runs can
 * share one Redis without touching each other's keys. Per-workspace keys carry a `{workspaceId}` hash tag
 * so every multi-key script touches one Redis Cluster slot.
 */
export class RedisNames {
  constructor(readonly prefix: string) {}

  /** String: JSON `KeyRecord`, looked up by SHA-256 (hex) of the API key. */
  apiKey(keyHash: string): string {
    return `${this.prefix}key:${keyHash}`;
  }

  /** Pattern matching every `apiKey` key; for SCAN during a full re-publish. */
  apiKeyPattern(): string {
    return `${this.prefix}key:*`;
  }

  /** Hash: field = network slug, value = JSON `NetworkRecord`. */
  networks(): string {
    return `${this.prefix}networks`;
  }

  /** Hash: field = plan name, value = JSON `PlanRecord`. */
  plans(): string {
    return `${this.prefix}plans`;
  }

  /** String: JSON `WorkspaceRecord` (the workspace's current plan limits). */
  workspace(workspaceId: string): string {
    return `${this.prefix}ws:{${workspaceId}}`;
  }

  /**
   * Hash: one filter the gateway keeps for a tenant (data-plane/src/filters): kind, last block covered,
   * criteria, expiry. `tenant` is the app's limit id (`app:{appId}`, or `ip:{address}` on the public
   * endpoint), the hash tag, so the filter and its tenant's `filterSet` share a Redis Cluster slot.
   */
  filter(tenant: string, filterId: string): string {
    return `${this.prefix}filter:{${tenant}}:${filterId}`;
  }

  /** Sorted set: a tenant's live filter ids scored by expiry (epoch ms); its size is the per-app filter cap's count. */
  filterSet(tenant: string): string {
    return `${this.prefix}filters:{${tenant}}`;
  }

  /** Pub/sub channel carrying `PlaneEvent` JSON messages from the control plane to data planes. */
  eventsChannel(): string {
    return `${this.prefix}events`;
  }

  /**
   * String (ISO time): when the control plane last completed a full publish; readiness signal, and the
   * marker that this Redis holds a publication. Only a full re-publish writes it, so its absence after it
   * was once seen means Redis lost its data (restarted empty): data planes keep their last known good
   * state and the worker re-publishes at once (control-plane/src/worker/recovery.service.ts).
   */
  publishedAt(): string {
    return `${this.prefix}published-at`;
  }

  /**
   * String (ISO time): the worker's own Redis structures (stream consumer groups, BullMQ job schedulers)
   * exist in this Redis; written by the worker once it created them. Checked beside `publishedAt` because
   * the control plane may restore that marker first after Redis restarted empty (its own reconnect repair),
   * and the worker must still recreate what only it keeps.
   */
  workerReady(): string {
    return `${this.prefix}worker-ready`;
  }

  /**
   * Failed log-ins (control plane only): `ip` and `email` are string counters for the current window,
   * `pair` (one email from one client address) a hash `{n, last}` driving its back-off. The subject is
   * hashed so no address or email appears in Redis key names.
   */
  loginAttempts(scope: "email" | "ip" | "pair", subjectHash: string): string {
    return `${this.prefix}login:${scope}:${subjectHash}`;
  }

  /** String counter: signUp calls from one client IP (hashed) in the current window (control plane only). */
  signUpAttempts(ipHash: string): string {
    return `${this.prefix}signup:ip:${ipHash}`;
  }

  /**
   * Stream: one entry per data-plane usage flush, field `batch` = JSON `UsageBatch`
   * (shared/src/usage/contract.ts); read by the usage worker's consumer group `usage-ingest`.
   */
  usageStream(): string {
    return `${this.prefix}usage:stream`;
  }

  /**
   * Stream: one entry per data-plane request-log flush, field `records` = JSON `RequestLogBatch`
   * (shared/src/requestlog/contract.ts); read by the worker's consumer group `request-log-ingest`.
   */
  requestLogStream(): string {
    return `${this.prefix}requestlog:stream`;
  }

  /**
   * Stream: entries a stream consumer set aside after they failed INGEST_MAX_ATTEMPTS times (the original
   * fields plus `deadEntryId`, `deadError`, `deadAttempts`, `deadAt`), e.g. `requestlog:stream:dead`.
   */
  deadLetterStream(stream: string): string {
    return `${stream}:dead`;
  }

  /**
   * Hash per UTC minute (epoch ms of its start) of errors that belong to no workspace (unknown or missing
   * key, public endpoint): field `<reason>|<client /24 or /48>`, value = count. Short TTL.
   */
  keylessErrors(minuteMs: number): string {
    return `${this.prefix}keyless:${minuteMs}`;
  }

  /**
   * Prefix BullMQ puts in front of its queue keys (`<bullPrefix>:<queue>:...`), inside the namespace. On a
   * Redis Cluster it is a hash tag, `{<prefix>bull}`: BullMQ's scripts touch several keys of a queue at
   * once, so they must share a slot (every queue then lives in that one slot). A single Redis keeps the
   * untagged name, so the jobs and schedulers of an existing deployment are not orphaned by an upgrade.
   */
  bullPrefix(cluster = false): string {
    return cluster ? `{${this.prefix}bull}` : `${this.prefix}bull`;
  }

  /**
   * String: JSON `HealthRecord` (records.ts) of one data-plane instance's upstream pools, written every
   * HEALTH_PUBLISH_INTERVAL_MS with a TTL of 3 intervals, so a stopped instance's record expires on its own.
   * Tagged on the instance id (one key per command; no cross-slot reads on a cluster).
   */
  upstreamHealth(instanceId: string): string {
    return `${this.prefix}health:{${instanceId}}`;
  }

  /**
   * String: the highest head any data-plane instance or thread has served for network `slug` (decimal),
   * raised with a compare-and-set script, so that instances serve a head that never goes back
   * (data-plane/src/upstream/served-head-share.ts). Tagged on the slug.
   */
  servedHead(slug: string): string {
    return `${this.prefix}served-head:{${slug}}`;
  }

  /**
   * Hash: data-plane instances publishing upstream health; field = instance id, value = epoch ms of its
   * last write. Readers GET each field's `upstreamHealth` key and drop fields whose key has expired.
   */
  upstreamHealthInstances(): string {
    return `${this.prefix}health:instances`;
  }

  /**
   * Hash: one per-second rate-limit window of one identifier (an app key hash, or `ip:<addr>` on the
   * public endpoint). Field = data-plane instance id, value = requests that instance admitted in the
   * window. `epochSecond` = floor(epoch ms / 1000). Tagged on the identifier: every script touches one key.
   */
  rateLimitWindow(identifier: string, epochSecond: number): string {
    return `${this.prefix}rl:{${identifier}}:${epochSecond}`;
  }

  /**
   * Hash: data-plane instances taking part in rate limiting; field = instance id, value = Redis server
   * time (ms) of its last heartbeat. How many share the traffic of an identifier not seen before.
   */
  rateLimitInstances(): string {
    return `${this.prefix}rl:instances`;
  }

  /**
   * String counter: response units a workspace used on one UTC day (`dayKey` = `utcDayKey(nowMs)` from
   * shared/src/quota/day.ts, `YYYY-MM-DD`). The control plane reads it for `workspace { today }`.
   */
  quotaDay(workspaceId: string, dayKey: string): string {
    return `${this.prefix}quota:{${workspaceId}}:d:${dayKey}`;
  }

  /** String counter: response units a workspace used in one UTC month (`monthKey` = `YYYY-MM`). */
  quotaMonth(workspaceId: string, monthKey: string): string {
    return `${this.prefix}quota:{${workspaceId}}:m:${monthKey}`;
  }

  /**
   * String: the last quota flush sequence number one data-plane instance applied for a workspace, so a
   * flush retried after an ambiguous failure (timeout) is applied once, not twice.
   */
  quotaFlushSeq(workspaceId: string, instanceId: string): string {
    return `${this.prefix}quota:{${workspaceId}}:seq:${instanceId}`;
  }

  /**
   * String counter: compute units a workspace used on one UTC day (the weights of its served request
   * objects, NetworkRecord.methodCosts), kept while its plan sets `dailyComputeUnitLimit` or
   * `monthlyComputeUnitLimit`. Same workspace tag as quotaDay.
   */
  computeUnitQuotaDay(workspaceId: string, dayKey: string): string {
    return `${this.prefix}cu:{${workspaceId}}:d:${dayKey}`;
  }

  /** String counter: the same workspace's compute units in one UTC month. */
  computeUnitQuotaMonth(workspaceId: string, monthKey: string): string {
    return `${this.prefix}cu:{${workspaceId}}:m:${monthKey}`;
  }

  /** String: the last compute-unit quota flush one data-plane instance applied (as quotaFlushSeq). */
  computeUnitQuotaFlushSeq(workspaceId: string, instanceId: string): string {
    return `${this.prefix}cu:{${workspaceId}}:seq:${instanceId}`;
  }

  /**
   * String counter: response units one app used on one UTC day, kept only for apps whose access rules set
   * a daily cap (`AccessRecord.requestsPerDay`). Tagged on the app: one flush touches one slot.
   */
  appQuotaDay(appId: string, dayKey: string): string {
    return `${this.prefix}quota:{app:${appId}}:d:${dayKey}`;
  }

  /** String counter: the same app's units in one UTC month (kept by the shared quota script; not read). */
  appQuotaMonth(appId: string, monthKey: string): string {
    return `${this.prefix}quota:{app:${appId}}:m:${monthKey}`;
  }

  /** String: the last app-cap flush sequence one data-plane instance applied for an app (as quotaFlushSeq). */
  appQuotaFlushSeq(appId: string, instanceId: string): string {
    return `${this.prefix}quota:{app:${appId}}:seq:${instanceId}`;
  }

  /**
   * String: JSON `NodeRecord` of one dedicated node (its internal RPC URLs and status), read by the data
   * plane's `/nodes/{nodeId}/{KEY}` endpoint. Tagged on the node id.
   */
  node(nodeId: string): string {
    return `${this.prefix}node:{${nodeId}}`;
  }

  /**
   * String: JSON `NodeSessionKeysRecord`: the data plane saw `author_rotateKeys` succeed on the node's
   * endpoint (read by the validator-status worker for the setup checklist).
   */
  nodeSessionKeys(nodeId: string): string {
    return `${this.prefix}node:{${nodeId}}:session-keys`;
  }

  /**
   * String (SET NX, expires after 2 days): the worker emitted `quota.threshold` at `percent` of the daily
   * limit for this workspace on `dayKey` (`utcDayKey`), in `unit` (requests, or compute units for plans with a
   * daily compute-unit limit). Makes "once per UTC day per threshold and unit" hold across worker restarts
   * and several workers.
   */
  webhookQuotaMarker(
    workspaceId: string,
    dayKey: string,
    percent: number,
    unit: "requests" | "computeUnits" = "requests",
  ): string {
    // The request marker keeps its original name, so a worker upgraded mid-day does not fire again.
    const u = unit === "requests" ? "" : ":cu";
    return `${this.prefix}webhook:quota:{${workspaceId}}${u}:${dayKey}:${percent}`;
  }

  /**
   * String counter (expires with its window): `sendTestWebhook` calls for one endpoint in the current
   * WEBHOOK_TEST_WINDOW_SECONDS window.
   */
  webhookTestSends(endpointId: string): string {
    return `${this.prefix}webhook:test:{${endpointId}}`;
  }

  /**
   * Sorted set: the workspace's webhook deliveries being attempted now, by any worker; member = delivery
   * id, score = Redis time (ms) after which a slot left by a crashed worker counts as free.
   */
  webhookInFlight(workspaceId: string): string {
    return `${this.prefix}webhook:inflight:{${workspaceId}}`;
  }
}
