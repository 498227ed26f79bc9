import type { SharedCacheMemory } from "../cache/shared-response-cache";
import type { DataPlaneConfig } from "../config";
import type { MetricsSnapshot } from "../metrics/metrics";
import type { QuotaTables } from "../ratelimit/limits";

/** What the main thread gives each serving thread at its start (`workerData`). */
export interface ThreadData {
  /** 1..threads; the `thread` field of its log lines and label of its per-thread series (0 = main). */
  readonly index: number;
  readonly threads: number;
  /** The process's configuration. */
  readonly config: DataPlaneConfig;
  /** ThreadReadiness: one Int32 per thread (index - 1), 1 while that thread is listening and ready. */
  readonly readyFlags: SharedArrayBuffer;
  /** UPSTREAM_BUFFER_BUDGET_BYTES shared by every thread (SharedBufferBudget). */
  readonly bufferBudget: SharedArrayBuffer;
  /** The per-tenant caps' counts shared by every thread (limits/tenant-counts.ts: allocateTenantTables). */
  readonly tenantTables: SharedArrayBuffer;
  /** Failed key look-ups per client address, shared by every thread (auth/lookup-throttle.ts). */
  readonly keyLookupTable: SharedArrayBuffer;
  /** Per-second counts per limiter identifier, shared by every thread (ratelimit/window-counts.ts). */
  readonly rateLimitTable: SharedArrayBuffer;
  /** The process's field in the rate limiter's Redis hashes: the threads reconcile as one instance. */
  readonly rateLimitInstanceId: string;
  /** Daily and monthly quota counts shared by every thread (ratelimit/limits.ts: allocateQuotaTables). */
  readonly quotaTables: QuotaTables;
  /** The response cache shared by every thread (cache/shared-response-cache.ts); absent with CACHE_MAX_BYTES=0. */
  readonly responseCache: SharedCacheMemory | undefined;
}

/** Main thread -> serving thread. */
export type ToThread =
  /** Close your listen socket and say so (`notListening`); keep serving open connections as before. */
  | { readonly type: "stopListening" }
  /** Drain and close the plane, then end the thread (SIGTERM/SIGINT, or another thread's fault). */
  | { readonly type: "stop"; readonly signal: string }
  /** Send your metrics snapshot for scrape `id` (a GET /metrics on the main thread's METRICS_PORT). */
  | { readonly type: "collect"; readonly id: number };

/** Serving thread -> main thread. */
export type FromThread =
  | { readonly type: "listening"; readonly port: number }
  | { readonly type: "notListening" }
  /** startDataPlane failed (e.g. no networks in Redis, port taken): the process exits 1. */
  | { readonly type: "startFailed"; readonly message: string }
  /** An uncaught exception (already logged and counted): the whole process drains and exits 1. */
  | { readonly type: "fatal" }
  | { readonly type: "snapshot"; readonly id: number; readonly metrics: MetricsSnapshot };
