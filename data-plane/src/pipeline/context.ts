import type { Logger } from "../../../shared/src/log/logger";
import type { Cidr } from "../allowlist/ip";
import type { JwtVerifier } from "../auth/jwt";
import type { KeyVerifier } from "../auth/key-verifier";
import type { ResponseCache } from "../cache/response-cache";
import type { DataPlaneConfig } from "../config";
import type { PoolCalls } from "../forward/pool-calls";
import type { LimitsGate } from "../limits/admission";
import type { ConcurrencyLimiter } from "../limits/concurrency";
import type { TenantCountSet } from "../limits/tenant-counts";
import type { Metrics } from "../metrics/metrics";
import type { MethodPolicy } from "../policy/method-policy";
import type { RequestLog } from "../requestlog/recorder";
import type { RequestTracing } from "../telemetry/tracing";
import type { UpstreamRegistry } from "../upstream/registry";
import type { UsageRecorder } from "../usage/recorder";
import type { NodeEndpoint } from "./authorize";
/** Everything a request needs, built once at start. */
export interface GatewayContext {
  readonly config: DataPlaneConfig;
  readonly logger: Logger;
  readonly verifier: KeyVerifier;
  readonly upstreams: UpstreamRegistry;
  readonly policy: MethodPolicy;
  readonly cache: ResponseCache;
  readonly metrics: Metrics;
  readonly trustedProxies: readonly Cidr[];
  /** Per-second rate limits and workspace quotas: admit each message before forwarding, record what is served. */
  readonly limits: LimitsGate;
  /** Dedicated node endpoints (`/nodes/{nodeId}/{KEY}`): their key authorizer and stage (nodes/node-gateway.ts). */
  readonly nodes?: NodeEndpoint;
  /** Usage recording: one record per request object answered (pipeline/account.ts). */
  readonly usage: UsageRecorder;
  /** Request log: every error plus sampled successes (check `wants(category)` before building a record). */
  readonly requestLog: RequestLog;
  /** Upstream calls in flight per app key / public client IP (MAX_IN_FLIGHT_PER_KEY). */
  readonly flights: ConcurrencyLimiter;
  /** Counts behind the per-tenant caps (flights and the WebSocket socket caps), shared by the process's threads. */
  readonly tenantCounts: TenantCountSet;
  /** JWT checks for apps that require them (verdicts cached until the token's exp). */
  readonly jwt: JwtVerifier;
  /** Request spans (OpenTelemetry when OTEL_* turn it on, else NO_TRACING: nothing sampled, nothing read). */
  readonly tracing: RequestTracing;
  /** Filters, pending nonces, broadcast sends and own reads on shared networks (forward/pool-calls.ts). */
  readonly poolCalls?: PoolCalls;
}

/** Which endpoint a request came in on. */
export const Endpoint = { App: 0, Public: 1, Node: 2 } as const;
export type Endpoint = (typeof Endpoint)[keyof typeof Endpoint];
