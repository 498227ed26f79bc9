import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { OTHER_METHOD } from "../../../shared/src/usage/contract";
import type { MethodRules } from "../access/access-rules";
import { type BatchPlan, planBatch, planBody, planUnits } from "../forward/batch-plan";
import { type CallOutcome, type ForwardDeps, forwardCall, forwardPlan, Outcome } from "../forward/forward";
import { type ConcurrencyRefusal, elementRefusal, refusalJson } from "../forward/refusals";
import type { RateUnit } from "../limits/admission";
import type { Flight } from "../limits/concurrency";
import type { MethodPolicy } from "../policy/method-policy";
import type { RateLimitResult } from "../ratelimit/rate-limiter";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import { errorJson, replyJson } from "../rpc/respond";
import { jsonRpcError, tailErrorCode } from "../telemetry/tracing";
import type { NetworkPool } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { type AccountSinks, RequestAccount, type Transport } from "./account";
import { type AdmissionRefusal, admit, type LimitsEndpoint } from "./admit";

/** A request's tenant before admission sets it (never used to forward). */
const NO_FLIGHT: Flight = Object.freeze({ id: "", max: 0, maxHeavy: 0 });

/** What a pipeline step returns: a promise only when it has to wait (key lookup, upstream call). */
export type Pending = Promise<void> | void;

/** The `X-Cache` value of an answer: "" when the call was not cacheable (or not a single call). */
export type CacheState = "" | "HIT" | "MISS";

/** What the pipeline needs to forward: the endpoint's own forwarding core, built once per process. */
export interface PipelineDeps extends AccountSinks, ForwardDeps {}

/**
 * What an endpoint adds between admission and forwarding (a dedicated node: its state, its pool, Safe
 * mode, what it keeps from answers). One object per endpoint, not per request.
 */
export interface EndpointStage {
  /**
   * After admission: sets `req.pool`, `req.policy` (and may change `req.network`), or answers the whole
   * request itself (a node not serving) and returns false.
   */
  prepare(req: PipelineRequest): boolean | Promise<boolean>;
  /** A forwarded call's result (a node keeps author_rotateKeys' session keys). */
  afterCall?(req: PipelineRequest, call: RpcCall, result: CallResult): void;
  /** Whether `afterCall` reads this call's answer (a batch holding one is not sent upstream verbatim). */
  keepsAnswer?(call: RpcCall): boolean;
}

/**
 * One request on its way through the pipeline, whatever the transport: parse, admission, forwarding
 * (forwardCall / planBatch), the mapping from outcome to answer (status, body, `X-Cache`, rate-limit
 * headers, `Retry-After`) and its accounting (RequestAccount). A transport extends it with `deliver`,
 * which writes the answer its own way (HTTP headers and body, a WebSocket message, a node's reply).
 */
export abstract class PipelineRequest extends RequestAccount {
  done = false;
  /** The answer, set once (`send`). */
  status = 0;
  body: string | Uint8Array = "";
  cache: CacheState = "";
  /** Retry-After in seconds on a refusal, else 0. */
  retryAfterS = 0;
  /** The rate decision, for X-RateLimit-* headers; undefined before admission. */
  rate: RateLimitResult | undefined = undefined;
  /** The unit of `rate` (X-RateLimit-Unit; "" = requests, no compute-unit window applied). */
  rateUnit: RateUnit = "";
  /** The single request's method once parsed (whole-request failures are recorded under it). */
  method = OTHER_METHOD;
  /** The id of a whole-request answer: the single call's once parsed ("null" for a batch, or before). */
  idText = "null";
  /** Where calls go, set before forwarding (the network's pool, or a node's). */
  pool: NetworkPool | undefined;
  policy: MethodPolicy;
  /** The app's own method rules (access rules), if any. */
  rules: MethodRules | undefined = undefined;
  /** The concurrency caps' tenant and its caps: the key's (its plan's), else `ip:{bucket}` (set at admission). */
  flight: Flight = NO_FLIGHT;
  /** Public endpoint: the client's address bucket (the per-second identity); undefined with a key. */
  ipBucket: string | undefined = undefined;
  /** The endpoint's stage between admission and forwarding; undefined = forward to `pool` as it is. */
  stage: EndpointStage | undefined = undefined;
  /** The request body's bytes, when it may be a batch that goes upstream as it is (forward/verbatim.ts). */
  bodyBytes: Uint8Array | undefined = undefined;

  constructor(
    readonly deps: PipelineDeps,
    transport: Transport,
    requestId: string,
    network: string,
    metricsNetwork: string,
    startedAt: number,
    pool: NetworkPool | undefined,
    policy: MethodPolicy,
    /** Metrics label of limit refusals. */
    readonly limitsEndpoint: LimitsEndpoint,
  ) {
    super(deps, transport, requestId, network, metricsNetwork, startedAt);
    this.pool = pool;
    this.policy = policy;
    if (pool !== undefined) this.weights = pool.weights;
  }

  /** Writes the answer (`status`, `body` and the header fields) the transport's way. Called once. */
  protected abstract deliver(): void;

  /** Whether the client went away meanwhile (nothing more is done for it). */
  protected abstract get gone(): boolean;

  /** The answer: queued or written by `deliver`, once. */
  send(status: number, body: string | Uint8Array): void {
    if (this.done) return;
    this.done = true;
    this.status = status;
    this.body = body;
    this.deliver();
  }

  /**
   * The body, once the transport has it and the key checks passed (`key`: the verified key; undefined on
   * the public endpoint). Synchronous up to the first upstream call: a cache hit creates no promise.
   */
  run(text: string): Pending {
    const parsed = parseRpcBody(text, this.bodyBytes);
    if (!parsed.ok) return this.fail(parsed.error, parsed.idText, parsed.limit);
    if (!parsed.batch) {
      this.method = parsed.call.method;
      if (parsed.call.idText !== undefined) this.idText = parsed.call.idText;
    }
    const cost = parsed.batch ? parsed.items.length : 1;
    const refused = parsed.batch
      ? admit(this, cost, undefined, parsed.items)
      : admit(this, cost, parsed.call.method);
    if (refused !== undefined) {
      return this.refuse(refused, this.idText, parsed.batch ? parsed.items : undefined);
    }
    const verbatim = parsed.batch && parsed.verbatim ? (this.bodyBytes ?? text) : undefined;
    const stage = this.stage;
    if (stage !== undefined) {
      const ready = stage.prepare(this);
      if (ready instanceof Promise) {
        return ready.then((ok) => {
          if (!ok || this.gone) return;
          return parsed.batch ? this.batch(parsed.items, verbatim) : this.forwardSingle(parsed.call);
        });
      }
      if (!ready) return;
    }
    return parsed.batch ? this.batch(parsed.items, verbatim) : this.forwardSingle(parsed.call);
  }

  /** A single call through the forwarding core, answered by `answerCall`. */
  forwardSingle(call: RpcCall): Pending {
    const out = forwardCall(this.deps, this.pool!, this.policy, this.flight, call, this.rules, this.trace);
    return out instanceof Promise ? out.then((o) => this.answerCall(call, o)) : this.answerCall(call, out);
  }

  /** A single call's outcome (see forwardCall) as the answer, unless the client went away meanwhile. */
  answerCall(call: RpcCall, out: CallOutcome): void {
    if (this.gone) return;
    const idText = call.idText;
    if (out.kind === Outcome.OverCap) {
      this.refuseOverCap(out.refusal, idText ?? "null");
      return;
    }
    if (out.kind === Outcome.Forwarded) {
      const r = out.result;
      this.stage?.afterCall?.(this, call, r);
      if (!r.ok) {
        this.fail(r.error, idText ?? "null");
        return;
      }
    }
    let category: string;
    let reason = "";
    let status = 200;
    let body = "";
    if (out.kind === Outcome.Refused) {
      const row = out.refusal.row;
      category = row.category;
      reason = row.reason;
      status = row.httpStatus;
      if (idText !== undefined) body = refusalJson(out.refusal, idText, this.requestId);
    } else {
      const reply = out.kind === Outcome.Cached ? out.reply : (out.result as { reply: Reply }).reply;
      if (out.kind === Outcome.Cached) this.cache = "HIT";
      else if (out.cacheable) this.cache = "MISS";
      category = reply.category;
      if (idText !== undefined) body = replyJson(idText, reply.tail);
    }
    if (this.trace !== undefined) this.traceErrorCode(out);
    this.count(call.method, category, reason);
    if (idText === undefined) {
      this.send(204, "");
      return;
    }
    // An answer with status 200 (a node's result or error, a method_blocked refusal) is a response
    // object served; a 4xx refusal is not.
    if (status === 200) this.served(1);
    this.send(status, body);
  }

  /** `verbatim`: the request body (text or bytes), when it may go upstream as it is (forward/verbatim.ts). */
  private async batch(items: BatchItem[], verbatim: string | Uint8Array | undefined): Promise<void> {
    const pool = this.pool!;
    const policy = this.policy;
    const rules = this.rules;
    const plan = planBatch(items, this.requestId, (c) => elementRefusal(c, pool, policy, rules));
    const keeps = this.stage?.keepsAnswer;
    if (verbatim !== undefined && keeps !== undefined && plan.forward.some(keeps)) verbatim = undefined;
    const done = await forwardPlan(this.deps, pool, this.flight, plan, this.requestId, verbatim, this.trace);
    if (this.gone) return;
    if (done.overCap !== undefined) return this.refuseOverCap(done.overCap, "null", items);
    const after = this.stage?.afterCall;
    if (after !== undefined)
      for (let j = 0; j < done.results.length; j++) after(this, plan.forward[j]!, done.results[j]!);
    // Every element was forwardable and none got an answer: the upstream side failed as a whole.
    const wholeFailure = plan.forward.length === items.length ? done.failure : undefined;
    this.countPlan(plan, items);
    if (wholeFailure !== undefined) return this.fail(wholeFailure, "null", undefined, false);
    const body = planBody(plan);
    if (body === "") return this.send(204, "");
    this.served(planUnits(plan, items));
    this.send(200, body);
  }

  /**
   * Every element of a settled plan, in runs of elements alike in method and category (a batch mostly
   * repeats its methods): one metrics add and one usage record of the run's size instead of one per element.
   */
  countPlan(plan: BatchPlan, items: readonly BatchItem[], elapsed = this.elapsed()): void {
    const n = items.length;
    const categories = plan.categories;
    let start = 0;
    let method = methodOf(items[0]!);
    for (let i = 1; i <= n; i++) {
      const next = i < n ? methodOf(items[i]!) : "";
      if (i < n && next === method && categories[i] === categories[start]) continue;
      this.count(method, categories[start]!, "", start, i - start, elapsed);
      start = i;
      method = next;
    }
  }

  /** 429 concurrency_limit for the whole request (nothing was forwarded): a tenant over its caps. */
  refuseOverCap(r: ConcurrencyRefusal, idText: string, items?: readonly BatchItem[]): void {
    this.deps.metrics.limitRefused(
      this.limitsEndpoint,
      GatewayError.ConcurrencyLimit.reason,
      items === undefined ? 1 : items.length,
    );
    this.refuse({ ...r, retryAfterSeconds: r.retryAfterMs / 1000 }, idText, items);
  }

  /**
   * 429 for the whole request: nothing forwarded, nothing counted as served. Usage records every request
   * object of it under its method (a refused batch of 30 shows as 30 Too Many Requests on the dashboard).
   */
  refuse(r: AdmissionRefusal, idText: string, items?: readonly BatchItem[]): void {
    if (this.done) return;
    const elapsed = this.elapsed();
    if (items === undefined) this.count(this.method, r.row.category, r.row.reason, 0, 1, elapsed);
    else
      for (let i = 0; i < items.length; i++)
        this.count(methodOf(items[i]!), r.row.category, r.row.reason, i, 1, elapsed);
    this.retryAfterS = r.retryAfterSeconds;
    const body = errorJson(r.row, idText, {
      requestId: this.requestId,
      retryAfterMs: r.retryAfterMs,
      limit: r.limit,
      message: r.message,
    });
    this.send(r.row.httpStatus, body);
  }

  /**
   * Whole-request failure: the row's HTTP status and a contract error object, counted once under the
   * row's category unless the caller already counted the elements (`record` false).
   */
  /** A sampled single call answered with an error object: its JSON-RPC code on the request's span. */
  private traceErrorCode(out: CallOutcome): void {
    let code: number | undefined;
    if (out.kind === Outcome.Refused) code = out.refusal.row.code;
    else if (out.kind === Outcome.Cached && out.reply.kind === ReplyKind.Error)
      code = tailErrorCode(out.reply.tail);
    else if (out.kind === Outcome.Forwarded && out.result.ok && out.result.reply.kind === ReplyKind.Error)
      code = tailErrorCode(out.result.reply.tail);
    if (code !== undefined) this.trace?.set(jsonRpcError(code));
  }

  fail(
    row: ErrorRow,
    idText: string,
    limit?: number,
    record = true,
    message?: string,
    retryAfterMs?: number,
  ): void {
    if (this.done) return;
    if (record) this.count(this.method, row.category, row.reason);
    this.trace?.set(jsonRpcError(row.code));
    if (retryAfterMs !== undefined) this.retryAfterS = Math.ceil(retryAfterMs / 1000);
    const body = errorJson(row, idText, { requestId: this.requestId, limit, message, retryAfterMs });
    this.send(row.httpStatus, body);
  }
}

/** A batch element's method for usage records ("other" for an invalid element). */
export function methodOf(item: BatchItem): string {
  return isItemError(item) ? OTHER_METHOD : item.method;
}

/**
 * A request whose answer the caller reads once `run` settled (`status`, `body`, ...), for transports that
 * write it themselves: a WebSocket message on a dedicated node's endpoint.
 */
export class HeldRequest extends PipelineRequest {
  protected deliver(): void {}

  protected get gone(): boolean {
    return false;
  }
}
