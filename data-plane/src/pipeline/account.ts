import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import type { RequestLogRecord } from "../../../shared/src/requestlog/contract";
import type { VerifiedKey } from "../auth/key-verifier";
import type { LimitsGate } from "../limits/admission";
import { type MethodWeights, UNIT_WEIGHTS } from "../limits/compute-units";
import type { Metrics } from "../metrics/metrics";
import type { RequestLog } from "../requestlog/recorder";
import type { RequestTrace } from "../telemetry/tracing";
import type { UsageRecorder } from "../usage/recorder";

/** The transport a request came in on, as the request log names it (`node`: a dedicated node's endpoint). */
export type Transport = "http" | "ws" | "node";

/** What accounting writes to: request metrics, usage, the request log, the quota (through the gate). */
export interface AccountSinks {
  readonly metrics: Metrics;
  readonly usage: UsageRecorder;
  readonly requestLog: RequestLog;
  readonly limits: LimitsGate;
}

/** The usage network name of a dedicated node's traffic (a usage network name: no ':' allowed). */
export function nodeUsageNetwork(nodeId: string): string {
  return `node-${nodeId.toLowerCase()}`;
}

/**
 * The accounting of one request (an HTTP request, a WebSocket message, a dedicated-node request), the same
 * for every transport:
 *
 * - `count`: request objects answered, in runs alike in method and category: the request metrics (unless
 *   the endpoint has no metrics label: dedicated nodes), one usage record of the run's size for the key's
 *   workspace and app (none: public endpoint, unknown key), and each element's request-log sampling.
 *   Successes are drawn once per request, at its first success, so a request's successes are logged
 *   together or not at all; errors are each asked (always logged while the log is on).
 * - `served`: response objects returned, against the key's quota (docs/contracts.md#how-requests-count).
 * - `logged`: hands the sampled records over once the answer's status (0 over WebSocket) and the
 *   client's address are known.
 *
 * Transports either extend it (the HTTP exchange: no second object per request) or make one per message.
 */
export class RequestAccount {
  /** Usage attribution (the verified key, even when refused later) and, once admitted, the quota's. */
  key: VerifiedKey | undefined = undefined;
  /** A sampled request's trace (telemetry/tracing.ts); undefined when not sampled or tracing is off. */
  trace: RequestTrace | undefined = undefined;
  /** The category last counted: a single call's answer (its span is ended by it over WebSocket). */
  category = "";
  /** The network's method weights (compute units); every method 1 where it has none (dedicated nodes). */
  weights: MethodWeights = UNIT_WEIGHTS;
  /**
   * The message's compute units once admission ran (`X-Compute-Units`): its weight when admitted, 0 when
   * refused; -1 before (a request that never reached admission: no header).
   */
  computeUnits = -1;
  private logRows: RequestLogRecord[] | undefined = undefined;
  private successesSampled: boolean | undefined = undefined;

  constructor(
    protected readonly sinks: AccountSinks,
    readonly transport: Transport,
    readonly requestId: string,
    /** Usage and request-log network: the network's slug, `node-{nodeId}` on a node endpoint. */
    public network: string,
    /** Label of the request metrics, "" = not counted there (dedicated nodes: one series per node). */
    public metricsNetwork: string,
    /** When the transport took the request (performance.now() ms). */
    readonly startedAt: number,
  ) {}

  /** Seconds since the request was taken. */
  elapsed(): number {
    return (performance.now() - this.startedAt) / 1000;
  }

  /**
   * `units` request objects (batch elements `item`..`item + units - 1`) alike in method and category,
   * answered after `elapsedSeconds`. `reason`: the gateway error row's reason ("" for answers).
   */
  count(
    method: string,
    category: string,
    reason = "",
    item = 0,
    units = 1,
    elapsedSeconds = this.elapsed(),
  ): void {
    const sinks = this.sinks;
    this.category = category;
    if (this.metricsNetwork !== "") {
      sinks.metrics.request(this.metricsNetwork, category, elapsedSeconds, units);
      sinks.metrics.methodLatency(this.metricsNetwork, method, elapsedSeconds, units);
    }
    // A custom endpoint other than a node's accounts for itself.
    if (this.network === "") return;
    const rec = this.key?.record;
    sinks.usage.record({
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network: this.network,
      method,
      category: category as ErrorCategory,
      latencyMs: elapsedSeconds * 1000,
      units,
      computeUnits: this.weights.of(method) * units,
    });
    // Sampling first: an unsampled success allocates nothing. One draw per request for its successes: a
    // batch of 100 at 1% then costs a set of rows in 1% of batches instead of about one row in 63% of them.
    const log = sinks.requestLog;
    let successes: boolean | undefined;
    if (category === ErrorCategory.Success) {
      this.successesSampled ??= log.wants(category);
      successes = this.successesSampled;
      if (!successes) return;
    }
    for (let i = item; i < item + units; i++)
      if (successes || log.wants(category)) this.logRow(method, category, elapsedSeconds, reason, i);
  }

  /**
   * `units` response objects returned: counted against the key's quota (none for public / node keys), and
   * the message's compute units against the compute-unit quota (once per message: the caller serves once).
   */
  served(units: number): void {
    if (this.key !== undefined)
      this.sinks.limits.recordServed(this.key, units, Math.max(this.computeUnits, 0));
  }

  /** Whether sampled records wait for `logged` (the client's address is worked out only then). */
  get hasLogRows(): boolean {
    return this.logRows !== undefined;
  }

  /** Hands the sampled records over with the answer's status (0 over WebSocket) and the client's prefix. */
  logged(httpStatus: number, clientIp: string | null): void {
    const rows = this.logRows;
    if (rows === undefined) return;
    this.logRows = undefined;
    const log = this.sinks.requestLog;
    for (const r of rows) {
      r.httpStatus = httpStatus;
      r.clientIp = clientIp;
      log.record(r);
    }
  }

  private logRow(
    method: string,
    category: string,
    elapsedSeconds: number,
    reason: string,
    item: number,
  ): void {
    const rec = this.key?.record;
    if (this.logRows === undefined) this.logRows = [];
    this.logRows.push({
      time: Date.now(),
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network: this.network,
      transport: this.transport,
      method,
      httpStatus: 0,
      category,
      reason,
      latencyMs: Math.round(elapsedSeconds * 1e6) / 1000,
      requestId: this.requestId,
      item,
      clientIp: null,
      computeUnits: this.weights.of(method),
    });
  }
}

/**
 * `count` subscription notifications pushed to clients of `key` on `network` (a published message counts
 * its clients of one key in one call): usage as Success with latency 0 (a push has no request to time),
 * method = the notification method (`eth_subscription`...), as many response units against the quota, and
 * `count` times that method's weight (`weights`: the network's) in compute units, in the usage rows and
 * against the compute-unit quota. Not in the request log (not a request).
 */
export function countPushes(
  sinks: AccountSinks,
  key: VerifiedKey | undefined,
  network: string,
  method: string,
  count: number,
  weights: MethodWeights,
): void {
  if (network === "") return;
  const rec = key?.record;
  const computeUnits = weights.of(method) * count;
  sinks.usage.record({
    workspaceId: rec?.workspaceId ?? null,
    appId: rec?.appId ?? null,
    network,
    method,
    category: ErrorCategory.Success,
    latencyMs: 0,
    units: count,
    computeUnits,
  });
  if (key !== undefined) sinks.limits.recordServed(key, count, computeUnits);
}
