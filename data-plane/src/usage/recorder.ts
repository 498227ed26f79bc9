import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Counter, Gauge, Registry } from "prom-client";
import { z } from "zod";
import { env, parseEnv } from "../../../shared/src/config/env";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { RedisNames } from "../../../shared/src/redis/keys";
import {
  BUCKET_COUNT,
  bucketIndex,
  DEFAULT_MAX_METHODS_PER_NETWORK_MINUTE,
  DEFAULT_USAGE_STREAM_MAXLEN,
  MethodBounder,
  NETWORK_NAME_RE,
  UNKNOWN_NETWORK,
  USAGE_STREAM_FIELD,
  UsageBatch,
  UsageRow,
} from "../../../shared/src/usage/contract";

/** What the request path knows about one answered request object (a batch of 30 records 30 units). */
export interface UsageContext {
  /** Null for unknown-key and public-endpoint traffic. */
  workspaceId: string | null;
  appId: string | null;
  network: string;
  method: string;
  category: ErrorCategory;
  latencyMs: number;
  /** Request objects this record stands for (default 1). */
  units?: number;
  /** Compute units of those request objects (their method's weight each); default: `units` (weight 1). */
  computeUnits?: number;
}

/** Usage recording capability the request path calls. `record` is synchronous and O(1). */
export interface UsageRecorder {
  record(ctx: UsageContext): void;
  /** Writes everything pending now (also called by the timer). Never throws. */
  flush(): Promise<void>;
  /**
   * Stops the timer and flushes everything, retrying until `closeTimeoutMs` (rows still unwritten then are
   * counted as dropped); for SIGTERM, after in-flight requests were answered.
   */
  close(): Promise<void>;
}

export class NoopUsageRecorder implements UsageRecorder {
  record(): void {}
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

/** Environment of the recorder; the data-plane config may spread this shape into its own. */
export const usageRecorderEnvShape = {
  /** How often aggregated usage is XADDed to the usage stream. */
  USAGE_FLUSH_INTERVAL_MS: env.int(5_000, 50, 600_000),
  /** Rows kept while Redis is unreachable; beyond it the oldest are dropped (gateway_usage_rows_dropped_total). */
  USAGE_MAX_PENDING_ROWS: env.int(200_000, 1, 100_000_000),
  /** Approximate MAXLEN of the usage stream (entries). */
  USAGE_STREAM_MAXLEN: env.int(DEFAULT_USAGE_STREAM_MAXLEN, 1_000, 1_000_000_000),
  /** Distinct non-well-known method names kept per network per minute; the rest count as `other`. */
  USAGE_MAX_METHODS_PER_NETWORK: env.int(DEFAULT_MAX_METHODS_PER_NETWORK_MINUTE, 0, 100_000),
  /** close(): how long to keep retrying the final flush. */
  USAGE_CLOSE_TIMEOUT_MS: env.int(5_000, 0, 600_000),
  /**
   * Written batches kept this long to be written again if Redis loses its data (restarted empty before
   * the worker read them); the worker dedups on batchId. 0 = off.
   */
  USAGE_REPLAY_WINDOW_MS: env.int(30_000, 0, 3_600_000),
  /**
   * Cap on the rows kept for that replay (oldest batches go first), so the memory the replay holds is
   * bounded whatever the traffic (per-row heap cost in docs/benchmarks.md); a gateway writing more rows
   * per replay window replays less.
   */
  USAGE_REPLAY_MAX_ROWS: env.int(10_000, 0, 100_000_000),
};

export interface UsageRecorderConfig {
  flushIntervalMs: number;
  maxPendingRows: number;
  streamMaxLen: number;
  maxMethodsPerNetwork: number;
  closeTimeoutMs: number;
  /** Rows per stream entry (a flush with more rows writes several entries). */
  maxRowsPerEntry: number;
  replayWindowMs: number;
  replayMaxRows: number;
}

export function loadUsageRecorderConfig(source: NodeJS.ProcessEnv = process.env): UsageRecorderConfig {
  const e = parseEnv(z.object(usageRecorderEnvShape), source);
  return {
    flushIntervalMs: e.USAGE_FLUSH_INTERVAL_MS,
    maxPendingRows: e.USAGE_MAX_PENDING_ROWS,
    streamMaxLen: e.USAGE_STREAM_MAXLEN,
    maxMethodsPerNetwork: e.USAGE_MAX_METHODS_PER_NETWORK,
    closeTimeoutMs: e.USAGE_CLOSE_TIMEOUT_MS,
    maxRowsPerEntry: 2_000,
    replayWindowMs: e.USAGE_REPLAY_WINDOW_MS,
    replayMaxRows: e.USAGE_REPLAY_MAX_ROWS,
  };
}

/** The Redis commands the recorder needs (an ioredis client satisfies it). */
export interface UsageRedis {
  xadd(key: string, ...args: (string | number)[]): Promise<string | null>;
}

export interface UsageRecorderDeps {
  redis: UsageRedis;
  names: RedisNames;
  config?: Partial<UsageRecorderConfig>;
  /** Registry for gateway_usage_* metrics (the data plane's /metrics registry). */
  registry?: Registry;
  /** Unique per process; defaults to hostname-pid-random. */
  instanceId?: string;
  now?: () => number;
  onError?: (err: unknown) => void;
}

/**
 * One aggregate being counted. Latency buckets are allocated lazily: while every observation fell into one
 * bucket (`bucket`), `buckets` is null, which is most rows (an app seen once or twice in a minute). That
 * and indexing rows by scope rather than by a composed string key keep a row a fraction of the size
 * (figures in docs/benchmarks.md); rows are held until the next flush, one per active app and method.
 */
interface Agg {
  minute: number;
  workspaceId: string | null;
  appId: string | null;
  network: string;
  method: string;
  category: ErrorCategory;
  count: number;
  computeUnits: number;
  latencySumMs: number;
  /** The only bucket observed while `buckets` is null (-1 until the row's first record). */
  bucket: number;
  buckets: number[] | null;
}

/** Rows of one scope (app, else workspace, else none): one row directly, several in an array. */
type ScopeRows = Agg | Agg[];

/** Network names already validated (slugs are few and long-lived); bounded like the method names. */
const MAX_VALID_NETWORKS = 1_000;

interface PendingBatch {
  batchId: string;
  createdAt: number;
  /** Cut aggregates (no longer written to); turned into UsageRows only when their entry is written. */
  rows: Agg[];
}

const KNOWN_CATEGORIES = new Set<string>(Object.values(ErrorCategory));

/**
 * In-memory per-minute aggregation flushed to the Redis usage stream.
 *
 * - `record()` updates one row (minute x workspace x app x network x method x category), found through a
 *   map by app (else workspace): no I/O, no key string built per request.
 * - Every `flushIntervalMs` the current aggregates are cut into batches (unique `batchId` =
 *   `instanceId:sequence`) and XADDed in order, `MAXLEN ~ streamMaxLen`. A batch whose XADD fails stays
 *   queued with the same batchId and is retried on the next tick (the worker dedups on batchId, so an XADD
 *   that succeeded but whose reply was lost is still counted once).
 * - Queued rows are capped at `maxPendingRows`; beyond it the oldest batches are dropped and counted in
 *   `gateway_usage_rows_dropped_total`.
 */
export class RedisUsageRecorder implements UsageRecorder {
  readonly instanceId: string;
  private readonly cfg: UsageRecorderConfig;
  private readonly now: () => number;
  /** Rows being aggregated (every minute not yet cut), in creation order. */
  private current: Agg[] = [];
  /**
   * The same rows by scope (appId, else workspaceId, else ""), found by comparing the other fields: a
   * scope holds one row per minute x network x method x category it used, a handful for an app (the
   * keyless scope of public traffic holds more, still a short scan next to the string key it replaces).
   */
  private byScope = new Map<string, ScopeRows>();
  private readonly validNetworks = new Set<string>();
  private readonly bounder: MethodBounder;
  private boundMinute = -1;
  /** The row the previous record went to, and that record's raw network and method names. */
  private last: Agg | undefined;
  private lastMethod = "";
  private lastNetwork = "";
  private pending: PendingBatch[] = [];
  private pendingRows = 0;
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;
  private readonly dropped: Counter | undefined;
  private readonly pendingGauge: Gauge | undefined;
  /** Rows dropped since start (also in the prom counter). */
  droppedRows = 0;
  /** Entries written in the last `replayWindowMs` (oldest first), kept as written. */
  private recent: { at: number; rows: number; payload: string }[] = [];
  private recentRows = 0;
  /** When the last XADD succeeded (this.now() clock). */
  private lastWriteAt = 0;
  /** Entries to write again (before anything pending), after Redis lost its data. */
  private replay: string[] = [];
  /** Entries written again since start. */
  replayedEntries = 0;

  constructor(private readonly deps: UsageRecorderDeps) {
    this.cfg = {
      flushIntervalMs: 5_000,
      maxPendingRows: 200_000,
      streamMaxLen: DEFAULT_USAGE_STREAM_MAXLEN,
      maxMethodsPerNetwork: DEFAULT_MAX_METHODS_PER_NETWORK_MINUTE,
      closeTimeoutMs: 5_000,
      maxRowsPerEntry: 2_000,
      replayWindowMs: 30_000,
      replayMaxRows: 10_000,
      ...deps.config,
    };
    this.now = deps.now ?? Date.now;
    this.instanceId = deps.instanceId ?? `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
    this.bounder = new MethodBounder(this.cfg.maxMethodsPerNetwork);
    if (deps.registry) {
      this.dropped =
        (deps.registry.getSingleMetric("gateway_usage_rows_dropped_total") as Counter | undefined) ??
        new Counter({
          name: "gateway_usage_rows_dropped_total",
          help: "Usage aggregate rows dropped because Redis was unreachable for too long",
          registers: [deps.registry],
        });
      this.pendingGauge =
        (deps.registry.getSingleMetric("gateway_usage_pending_rows") as Gauge | undefined) ??
        new Gauge({
          name: "gateway_usage_pending_rows",
          help: "Usage aggregate rows waiting to be written to Redis",
          registers: [deps.registry],
        });
    }
  }

  /** Starts the periodic flush (the timer does not keep the process alive). */
  start(): this {
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => void this.flush(), this.cfg.flushIntervalMs);
      this.timer.unref();
    }
    return this;
  }

  record(ctx: UsageContext): void {
    const t = this.now();
    const minute = t - (t % 60_000);
    if (minute !== this.boundMinute) {
      this.boundMinute = minute;
      this.bounder.reset();
    }
    const ws = ctx.workspaceId ?? null;
    const app = ctx.appId ?? null;
    let a: Agg | undefined;
    // The same request as the previous record (the common case under load): its row, without validating
    // and bounding the names again. Same minute, so the bounder maps the same raw names the same way.
    const last = this.last;
    if (
      last !== undefined &&
      last.minute === minute &&
      ctx.method === this.lastMethod &&
      ctx.network === this.lastNetwork &&
      ctx.category === last.category &&
      app === last.appId &&
      ws === last.workspaceId
    ) {
      a = last;
    } else {
      a = this.find(ctx, minute, ws, app);
    }
    const units = ctx.units !== undefined && ctx.units > 0 ? Math.floor(ctx.units) : 1;
    const latency = Number.isFinite(ctx.latencyMs) && ctx.latencyMs > 0 ? ctx.latencyMs : 0;
    const b = bucketIndex(latency);
    a.count += units;
    const cu = ctx.computeUnits;
    a.computeUnits += cu !== undefined && cu >= 0 ? Math.floor(cu) : units;
    a.latencySumMs += latency * units;
    if (a.buckets === null) {
      if (a.bucket === -1) a.bucket = b;
      if (b === a.bucket) return;
      // A second bucket: the row needs the full histogram from now on (the first bucket holds the rest).
      a.buckets = new Array<number>(BUCKET_COUNT).fill(0);
      a.buckets[a.bucket] = a.count - units;
    }
    a.buckets[b]! += units;
  }

  /**
   * The row `ctx` adds to, found by scope, or a new empty one. Remembers it and the raw names for the next
   * record.
   */
  private find(ctx: UsageContext, minute: number, ws: string | null, app: string | null): Agg {
    const network = this.networkName(ctx.network);
    const method = this.bounder.bound(network, ctx.method);
    const category = KNOWN_CATEGORIES.has(ctx.category) ? ctx.category : ErrorCategory.UnknownError;
    const scope = app || ws || "";
    const found = this.byScope.get(scope);
    let a: Agg | undefined;
    if (found !== undefined) {
      if (Array.isArray(found)) {
        for (let i = 0; i < found.length; i++) {
          const r = found[i]!;
          if (matches(r, minute, ws, app, network, method, category)) {
            a = r;
            break;
          }
        }
      } else if (matches(found, minute, ws, app, network, method, category)) {
        a = found;
      }
    }
    this.lastMethod = ctx.method;
    this.lastNetwork = ctx.network;
    if (a === undefined) {
      // Empty, its one bucket still to be set by the first record (`bucket` -1 matches no index).
      a = {
        minute,
        workspaceId: ws,
        appId: app,
        network,
        method,
        category,
        count: 0,
        computeUnits: 0,
        latencySumMs: 0,
        bucket: -1,
        buckets: null,
      };
      this.current.push(a);
      if (found === undefined) this.byScope.set(scope, a);
      else if (Array.isArray(found)) found.push(a);
      else this.byScope.set(scope, [found, a]);
    }
    this.last = a;
    return a;
  }

  private networkName(network: string): string {
    if (this.validNetworks.has(network)) return network;
    if (typeof network !== "string" || !NETWORK_NAME_RE.test(network)) return UNKNOWN_NETWORK;
    if (this.validNetworks.size >= MAX_VALID_NETWORKS) this.validNetworks.clear();
    this.validNetworks.add(network);
    return network;
  }

  /**
   * Redis lost its data (it restarted empty): entries written in the last `replayWindowMs` before the
   * last successful write (the last moment the old Redis took one; not now, which is after the outage)
   * may be gone before the worker read them. Writes them again, ahead of anything newer; entries the
   * worker did read are recognised by their batchId and only acknowledged. Returns the number of entries
   * queued.
   */
  redeliverRecent(): number {
    const until = this.lastWriteAt;
    const again = this.recent.filter((r) => until - r.at <= this.cfg.replayWindowMs).map((r) => r.payload);
    this.recent = [];
    this.recentRows = 0;
    this.replay.push(...again);
    if (again.length > 0) void this.flush();
    return again.length;
  }

  private remember(rows: number, payload: string): void {
    this.lastWriteAt = this.now();
    if (this.cfg.replayWindowMs <= 0 || rows > this.cfg.replayMaxRows) return;
    const now = this.now();
    this.recent.push({ at: now, rows, payload });
    this.recentRows += rows;
    while (
      this.recent.length > 0 &&
      (this.recentRows > this.cfg.replayMaxRows || now - this.recent[0]!.at > this.cfg.replayWindowMs)
    ) {
      this.recentRows -= this.recent.shift()!.rows;
    }
  }

  /** Rows waiting in memory (aggregating now + queued batches). */
  get pendingRowCount(): number {
    return this.current.length + this.pendingRows;
  }

  flush(): Promise<void> {
    // One flush at a time; a tick arriving during a flush joins it.
    this.flushing ??= this.doFlush().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const deadline = Date.now() + this.cfg.closeTimeoutMs;
    await this.flush();
    // A timer flush already running when close() was called joined above, but it cut before the latest
    // records: cut and write those too.
    if (this.current.length > 0) await this.flush();
    while ((this.pending.length > 0 || this.replay.length > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, Math.min(200, Math.max(1, deadline - Date.now()))));
      await this.flush();
    }
    // Gave up (Redis still unreachable): what is left is lost; make it visible.
    for (const b of this.pending) this.drop(b.rows.length);
    this.pending = [];
    this.pendingGauge?.set(this.pendingRowCount);
  }

  private cut(): void {
    if (this.current.length === 0) return;
    // Rows become UsageRow objects entry by entry at write time, so a large cut holds one ~100-byte
    // aggregate per row until written, not a row object and a 24-number array each.
    const rows = this.current;
    this.current = [];
    this.byScope = new Map();
    this.last = undefined; // cut rows are queued for writing: never counted into again
    const createdAt = this.now();
    for (let i = 0; i < rows.length; i += this.cfg.maxRowsPerEntry) {
      const part = rows.slice(i, i + this.cfg.maxRowsPerEntry);
      this.pending.push({ batchId: `${this.instanceId}:${++this.seq}`, createdAt, rows: part });
      this.pendingRows += part.length;
    }
    // Bound memory: drop the oldest queued batches beyond the cap.
    while (this.pendingRows > this.cfg.maxPendingRows && this.pending.length > 0) {
      const over = this.pendingRows - this.cfg.maxPendingRows;
      const oldest = this.pending[0]!;
      if (oldest.rows.length <= over) {
        this.pending.shift();
        this.drop(oldest.rows.length);
      } else {
        oldest.rows.splice(0, over);
        this.drop(over);
      }
    }
  }

  private drop(n: number): void {
    this.pendingRows -= n;
    this.droppedRows += n;
    this.dropped?.inc(n);
  }

  private xadd(stream: string, payload: string): Promise<string | null> {
    return this.deps.redis.xadd(
      stream,
      "MAXLEN",
      "~",
      this.cfg.streamMaxLen,
      "*",
      USAGE_STREAM_FIELD,
      payload,
    );
  }

  private async doFlush(): Promise<void> {
    this.cut();
    const stream = this.deps.names.usageStream();
    while (this.replay.length > 0) {
      const payload = this.replay[0]!;
      try {
        await this.xadd(stream, payload);
      } catch (err) {
        this.deps.onError?.(err);
        this.pendingGauge?.set(this.pendingRowCount);
        return; // replayed entries go first: retried on the next tick
      }
      this.replay.shift();
      this.replayedEntries++;
      this.remember(0, payload);
    }
    while (this.pending.length > 0) {
      const b = this.pending[0]!;
      const batch: UsageBatch = {
        v: 1,
        batchId: b.batchId,
        instanceId: this.instanceId,
        createdAt: b.createdAt,
        rows: b.rows.map(toUsageRow),
      };
      const payload = JSON.stringify(batch);
      try {
        await this.xadd(stream, payload);
      } catch (err) {
        this.deps.onError?.(err);
        break; // keep it (and everything after it) for the next tick
      }
      this.remember(b.rows.length, payload);
      // The batch may have been trimmed by the cap while the XADD was in flight.
      if (this.pending[0] === b) {
        this.pending.shift();
        this.pendingRows -= b.rows.length;
      }
    }
    this.pendingGauge?.set(this.pendingRowCount);
  }
}

function toUsageRow(a: Agg): UsageRow {
  let buckets = a.buckets;
  if (buckets === null) {
    buckets = new Array<number>(BUCKET_COUNT).fill(0);
    buckets[a.bucket] = a.count;
  }
  return {
    minute: a.minute,
    workspaceId: a.workspaceId,
    appId: a.appId,
    network: a.network,
    method: a.method,
    category: a.category,
    count: a.count,
    computeUnits: a.computeUnits,
    latencySumMs: Math.round(a.latencySumMs * 1000) / 1000,
    buckets,
  };
}

function matches(
  a: Agg,
  minute: number,
  ws: string | null,
  app: string | null,
  network: string,
  method: string,
  category: string,
): boolean {
  return (
    a.minute === minute &&
    a.method === method &&
    a.category === category &&
    a.network === network &&
    // null and "" are one scope, as they always were in the row key.
    (a.appId ?? "") === (app ?? "") &&
    (a.workspaceId ?? "") === (ws ?? "")
  );
}
