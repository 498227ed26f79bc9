import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { PlanLimits } from "../../../shared/src/redis/records";
import type { VerifiedKey } from "../auth/key-verifier";
import type { Metrics } from "../metrics/metrics";
import type { QuotaResult } from "../quota/quota-tracker";
import type { Limits } from "../ratelimit/limits";
import { type RateLimitResult, rateLimitErrorExtras, retryAfterSeconds } from "../ratelimit/rate-limiter";

/**
 * Admission of one client message (an HTTP request, a WebSocket text message) against the per-second
 * rate limit and the workspace's daily / monthly quota (docs/contracts.md#limits-and-plans).
 * Transport-free so HTTP and WebSocket apply the same rules:
 *
 * - `cost` is the number of request objects in the message (a batch of 30 costs 30; notifications and
 *   invalid elements count too). The limiter is consulted once per message with the whole cost: a batch
 *   that would cross the limit is refused whole and consumes nothing.
 * - App keys are limited per workspace (`ws:{workspaceId}`: all its apps and keys together, so creating
 *   more apps buys no more throughput) at the plan's `requestsPerSecond`; the public endpoint per client
 *   IP (`ip:{address}`; IPv6 per /64, `ip:2001:db8:1:2::/64`, see allowlist/ip.ts ipBucket) at
 *   `PUBLIC_RATE_LIMIT_PER_SECOND`.
 * - Dedicated-node keys (`kind: "node"`) are limited per node (`node:{nodeId}`) at the plan's
 *   `requestsPerSecond`, with no quota: nodes have their own limits, their traffic is not counted as served.
 * - Then, for app keys only, the quota: `count + cost` must stay within the daily (and monthly) limit.
 * - Apps' own caps (access rules, docs/contracts.md#access-rules): a per-second cap below the plan's is
 *   one more window, per app (`app:{appId}`, so a regenerated key and its predecessor in its grace period
 *   share it), committed first, then the workspace's window; when the workspace's refuses, the app's is
 *   refunded in the same synchronous turn, so a refusal by either window consumes nothing from the other
 *   (another thread may meanwhile have seen the app's count with it: refused early, never admitted over
 *   a limit; rate-limiter.ts `refund`). A refusal
 *   names the window that refused (`app_rate_limit` for the app's cap). A daily cap is one more quota, per
 *   app (`Limits.appQuota`), checked after the workspace's. Only apps with a daily cap are counted per app.
 * - After answering, `recordServed(key, units)` counts the response objects actually returned (one unit
 *   each; a notification returns none). Per-element error objects inside a served batch (an invalid
 *   element, a blocked method, an upstream error for that element) are response objects and count;
 *   whole-request failures (4xx/5xx bodies: parse errors, auth, upstreams down) and everything refused
 *   here do not.
 */
export type Admission = Admitted | Refused;

export interface Admitted {
  readonly ok: true;
  /** The rate decision, for `X-RateLimit-Limit` / `X-RateLimit-Remaining` (see `rateLimitHeaders`). */
  readonly rate: RateLimitResult;
  /** The unit of `rate` (`X-RateLimit-Unit`); "" when no compute-unit window applies (requests). */
  readonly unit: RateUnit;
}

/**
 * The unit of the rate-limit headers: "" (no compute-unit window: requests, no `X-RateLimit-Unit`),
 * `requests` or `compute-units` (the plan or app limits compute units per second: the window closer to
 * exhaustion, docs/compute-units.md).
 */
export type RateUnit = "" | "requests" | "compute-units";

export interface Refused {
  readonly ok: false;
  /** GatewayError.RateLimited, DailyLimit, MonthlyLimit, AppRateLimited or AppDailyLimit (all 429 / -32005). */
  readonly row: ErrorRow;
  /** `data.retryAfterMs`; `Retry-After` is `retryAfterSeconds` (whole seconds, rounded up). */
  readonly retryAfterMs: number;
  readonly retryAfterSeconds: number;
  /** `data.limit`: the per-second limit, or the daily / monthly limit that refused. */
  readonly limit: number;
  /** A message replacing the row's (batch larger than the per-second limit), else undefined. */
  readonly message: string | undefined;
  /**
   * Metrics label: rate_limit, batch_exceeds_limit, store_unavailable, daily_limit, monthly_limit,
   * app_rate_limit, app_daily_limit.
   */
  readonly cause: string;
  readonly rate: RateLimitResult;
  readonly unit: RateUnit;
}

export interface AdmissionOptions {
  limits: Limits;
  metrics: Metrics;
  /** Per client IP on the public endpoint. */
  publicPerSecond: number;
}

/**
 * The rate limiter's identifier for a workspace: every app key of it shares this window. Tagged on the
 * workspace id in Redis (`rl:{ws:<id>}:<second>`).
 */
export function workspaceIdentifier(key: VerifiedKey): string {
  const workspaceId = key.record.workspaceId;
  let id = workspaceIds.get(workspaceId);
  if (id === undefined) {
    // Bounded: one string per active workspace, rebuilt after a clear.
    if (workspaceIds.size >= 16_384) workspaceIds.clear();
    id = `ws:${workspaceId}`;
    workspaceIds.set(workspaceId, id);
  }
  return id;
}
const workspaceIds = new Map<string, string>();

/** The rate limiter's identifier for a workspace's compute units per second (`cu:ws:<id>`). */
export function workspaceComputeIdentifier(key: VerifiedKey): string {
  const workspaceId = key.record.workspaceId;
  let id = workspaceComputeIds.get(workspaceId);
  if (id === undefined) {
    if (workspaceComputeIds.size >= 16_384) workspaceComputeIds.clear();
    id = `cu:ws:${workspaceId}`;
    workspaceComputeIds.set(workspaceId, id);
  }
  return id;
}
const workspaceComputeIds = new Map<string, string>();

/** The rate limiter's identifier for an app's own compute-unit cap (`cu:app:<id>`). */
export function keyComputeIdentifier(key: VerifiedKey): string {
  if (key.computeLimitId !== undefined) return key.computeLimitId;
  key.computeLimitId = `cu:${keyIdentifier(key)}`;
  return key.computeLimitId;
}

/** The rate limiter's identifier for an app's own cap: per app, else per key. */
export function keyIdentifier(key: VerifiedKey): string {
  if (key.limitId !== undefined) return key.limitId;
  const appId = key.record.appId;
  key.limitId = appId !== null && appId !== "" ? `app:${appId}` : `key:${key.hash}`;
  return key.limitId;
}

/** The rate limiter's identifier for a dedicated node's key: per node (a regenerated key keeps the budget). */
export function nodeIdentifier(key: VerifiedKey): string {
  if (key.limitId !== undefined) return key.limitId;
  const nodeId = key.record.nodeId;
  key.limitId = nodeId !== null && nodeId !== "" ? `node:${nodeId}` : `key:${key.hash}`;
  return key.limitId;
}

export class LimitsGate {
  readonly limits: Limits;
  private readonly metrics: Metrics;
  private readonly publicPerSecond: number;

  constructor(opts: AdmissionOptions) {
    this.limits = opts.limits;
    this.metrics = opts.metrics;
    this.publicPerSecond = opts.publicPerSecond;
  }

  /**
   * Admits a message of `cost` request objects. `key` is the verified key (app endpoints) or undefined
   * (public endpoint: `clientIp` is then the limited identity; an unknown address shares one budget).
   * Synchronous, no Redis round trip, never throws.
   */
  admit(
    key: VerifiedKey | undefined,
    clientIp: string | undefined,
    cost: number,
    units: number = cost,
  ): Admission {
    if (key === undefined) {
      const rate = this.limits.rateLimiter.check(`ip:${clientIp ?? "unknown"}`, cost, this.publicPerSecond);
      if (rate.allowed) return { ok: true, rate, unit: "" };
      return this.rateRefusal(rate, "public", cost);
    }
    const plan = key.record.plan;
    if (key.record.kind === "node") {
      // A dedicated node has its own limits (docs/contracts.md#how-requests-count): per node per second at
      // the plan's rate, and no workspace quota (its traffic is not the shared nodes' daily allowance).
      const rate = this.limits.rateLimiter.check(nodeIdentifier(key), cost, plan.requestsPerSecond);
      return rate.allowed ? { ok: true, rate, unit: "" } : this.rateRefusal(rate, "node", cost);
    }
    const access = key.access;
    const limiter = this.limits.rateLimiter;
    // Up to four per-second windows, each committed in turn; a refusal by one takes back what the earlier
    // ones committed in this same synchronous turn, so a refused message consumes nothing anywhere (a
    // check without commit followed by a commit later would let another serving thread take the room in
    // between: every window is process-wide). The app's caps first, then the workspace's.
    const cap = access?.requestsPerSecond;
    const appCap = cap !== undefined && cap < plan.requestsPerSecond ? cap : 0;
    const wsCu = plan.computeUnitsPerSecond ?? 0;
    const cuCap = access?.computeUnitsPerSecond;
    const appCu = cuCap !== undefined && (wsCu === 0 || cuCap < wsCu) ? cuCap : 0;
    let appRate: RateLimitResult | undefined;
    let appCuRate: RateLimitResult | undefined;
    if (appCap > 0) {
      appRate = limiter.check(keyIdentifier(key), cost, appCap);
      if (!appRate.allowed) return this.rateRefusal(appRate, "app", cost, true);
    }
    if (appCu > 0) {
      appCuRate = limiter.check(keyComputeIdentifier(key), units, appCu);
      if (!appCuRate.allowed) {
        if (appRate !== undefined) limiter.refund(keyIdentifier(key), cost);
        return this.rateRefusal(appCuRate, "app", cost, true, true);
      }
    }
    const wsRate = limiter.check(workspaceIdentifier(key), cost, plan.requestsPerSecond);
    if (!wsRate.allowed) {
      this.refundApp(key, appRate, appCuRate, cost, units);
      return this.rateRefusal(wsRate, "app", cost);
    }
    let wsCuRate: RateLimitResult | undefined;
    if (wsCu > 0) {
      wsCuRate = limiter.check(workspaceComputeIdentifier(key), units, wsCu);
      if (!wsCuRate.allowed) {
        this.refundApp(key, appRate, appCuRate, cost, units);
        limiter.refund(workspaceIdentifier(key), cost);
        return this.rateRefusal(wsCuRate, "app", cost, false, true);
      }
    }
    // The headers show the tightest window: of the request windows, of the compute-unit windows, then
    // of the two units the one closer to exhaustion (the smaller share of its limit left).
    let rate = appRate !== undefined && appRate.remaining < wsRate.remaining ? appRate : wsRate;
    let unit: RateUnit = "";
    if (wsCuRate !== undefined || appCuRate !== undefined) {
      let cuRate = wsCuRate ?? appCuRate!;
      if (appCuRate !== undefined && appCuRate.remaining < cuRate.remaining) cuRate = appCuRate;
      unit = "requests";
      if (cuRate.remaining * rate.limit < rate.remaining * cuRate.limit) {
        rate = cuRate;
        unit = "compute-units";
      }
    }
    const q = this.limits.quota.check(key.record.workspaceId, plan, cost);
    if (!q.allowed) return this.quotaRefusal(q, rate, unit, cost, false);
    if (plan.dailyComputeUnitLimit != null || plan.monthlyComputeUnitLimit != null) {
      const cq = this.limits.computeUnitQuota.check(key.record.workspaceId, computeUnitLimits(plan), units);
      if (!cq.allowed) return this.quotaRefusal(cq, rate, unit, cost, true);
    }
    const daily = access?.requestsPerDay;
    if (daily === undefined) return { ok: true, rate, unit };
    return this.appDaily(key.record.appId ?? key.hash, daily, cost, rate, unit);
  }

  /** Takes back the app's windows committed by this admission (a later window refused). */
  private refundApp(
    key: VerifiedKey,
    appRate: RateLimitResult | undefined,
    appCuRate: RateLimitResult | undefined,
    cost: number,
    units: number,
  ): void {
    const limiter = this.limits.rateLimiter;
    if (appRate !== undefined) limiter.refund(keyIdentifier(key), cost);
    if (appCuRate !== undefined) limiter.refund(keyComputeIdentifier(key), units);
  }

  /** A daily or monthly quota refused (`computeUnits`: the plan's compute-unit quota). */
  private quotaRefusal(
    q: QuotaResult,
    rate: RateLimitResult,
    unit: RateUnit,
    cost: number,
    computeUnits: boolean,
  ): Refused {
    const monthly = q.reason === "monthly_limit";
    const cause = monthly ? "monthly_limit" : "daily_limit";
    this.metrics.limitRefused("app", cause, cost);
    return {
      ok: false,
      row: monthly ? GatewayError.MonthlyLimit : GatewayError.DailyLimit,
      retryAfterMs: q.retryAfterMs,
      retryAfterSeconds: retryAfterSeconds(q.retryAfterMs),
      limit: monthly ? (q.monthLimit ?? q.limit) : q.limit,
      message: computeUnits
        ? `Too many requests: ${monthly ? "monthly" : "daily"} compute unit limit reached`
        : undefined,
      cause,
      rate,
      unit,
    };
  }

  /**
   * Counts `units` response objects served to the key's workspace (nothing for the public endpoint or a
   * node key), and to its app when the app has a daily cap.
   */
  recordServed(key: VerifiedKey | undefined, units: number, computeUnits = 0): void {
    if (key === undefined || key.record.kind === "node" || !(units > 0)) return;
    this.limits.quota.record(key.record.workspaceId, units);
    // Counted only while the plan limits compute units per day or month: no counter to keep otherwise
    // (usage rows carry every request's compute units for reports either way).
    const plan = key.record.plan;
    if (computeUnits > 0 && (plan.dailyComputeUnitLimit != null || plan.monthlyComputeUnitLimit != null)) {
      this.limits.computeUnitQuota.record(key.record.workspaceId, computeUnits);
    }
    if (key.access?.requestsPerDay !== undefined) {
      this.limits.appQuota.record(key.record.appId ?? key.hash, units);
    }
  }

  /** The app's own daily cap, after the workspace quota admitted the message. */
  private appDaily(
    appId: string,
    daily: number,
    cost: number,
    rate: RateLimitResult,
    unit: RateUnit,
  ): Admission {
    const q = this.limits.appQuota.check(appId, appCapLimits(daily), cost);
    if (q.allowed) return { ok: true, rate, unit };
    const cause = GatewayError.AppDailyLimit.reason;
    this.metrics.limitRefused("app", cause, cost);
    return {
      ok: false,
      row: GatewayError.AppDailyLimit,
      retryAfterMs: q.retryAfterMs,
      retryAfterSeconds: retryAfterSeconds(q.retryAfterMs),
      limit: daily,
      message: undefined,
      cause,
      rate,
      unit,
    };
  }

  /** `appCap`: the limit applied was the app's own cap (access rules), lower than the plan's. */
  private rateRefusal(
    rate: RateLimitResult,
    endpoint: "app" | "public" | "node",
    cost: number,
    appCap = false,
    computeUnits = false,
  ): Refused {
    // The store being down is not the app's cap's doing: that refusal stays `rate_limit`.
    const app = appCap && rate.reason !== "store_unavailable";
    const row = app ? GatewayError.AppRateLimited : GatewayError.RateLimited;
    const cause = rate.reason ?? row.reason;
    this.metrics.limitRefused(endpoint, cause, cost);
    const extras = rateLimitErrorExtras(rate);
    let message = extras.message;
    const per = computeUnits ? "compute units/s" : "requests/s";
    if (app && rate.reason === "batch_exceeds_limit") {
      message = `Too many requests: batch larger than the app's cap of ${rate.limit} ${per}; split the batch or raise the app's cap`;
    } else if (rate.reason === "store_unavailable") {
      message = "Too many requests: rate limit store unavailable, retry shortly";
    } else if (computeUnits && rate.reason === "batch_exceeds_limit") {
      message = `Too many requests: batch larger than the rate limit of ${rate.limit} compute units/s; split the batch or upgrade the plan`;
    } else if (computeUnits) {
      message = `Too many requests: ${app ? "the app's per-second cap" : "rate limit"} of ${rate.limit} compute units/s exceeded`;
    }
    return {
      ok: false,
      row,
      retryAfterMs: extras.retryAfterMs,
      retryAfterSeconds: retryAfterSeconds(extras.retryAfterMs),
      limit: extras.limit,
      message,
      cause,
      rate,
      unit: computeUnits ? "compute-units" : "",
    };
  }
}

/** The plan-shaped limits the quota tracker takes, for an app's daily cap (per app ids, shared by equal caps). */
const capLimits = new Map<number, PlanLimits>();
function appCapLimits(daily: number): PlanLimits {
  let l = capLimits.get(daily);
  if (l === undefined) {
    if (capLimits.size >= 1024) capLimits.clear();
    l = Object.freeze({
      name: "app-cap",
      requestsPerSecond: 1,
      dailyRequestLimit: daily,
      monthlyRequestLimit: null,
    });
    capLimits.set(daily, l);
  }
  return l;
}

/**
 * A plan's compute-unit quotas in the shape the quota tracker takes (its daily / monthly limits), one frozen
 * object per plan object (records are replaced, not edited, when a plan changes).
 */
const cuLimits = new WeakMap<PlanLimits, PlanLimits>();
function computeUnitLimits(plan: PlanLimits): PlanLimits {
  let l = cuLimits.get(plan);
  if (l === undefined) {
    l = Object.freeze({
      name: plan.name,
      requestsPerSecond: 1,
      dailyRequestLimit: plan.dailyComputeUnitLimit ?? Number.POSITIVE_INFINITY,
      monthlyRequestLimit: plan.monthlyComputeUnitLimit ?? null,
    });
    cuLimits.set(plan, l);
  }
  return l;
}

/**
 * `X-RateLimit-Limit` and `X-RateLimit-Remaining` values for a decision, or undefined when no per-second
 * limit applies (RATE_LIMIT_MODE=off).
 */
export function rateLimitHeaders(rate: RateLimitResult | undefined): [string, string] | undefined {
  if (rate === undefined || !(rate.limit < Number.POSITIVE_INFINITY)) return undefined;
  return [String(rate.limit), String(rate.remaining)];
}
