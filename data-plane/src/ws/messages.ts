import type uWS from "uWebSockets.js";
import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { planBatch, planBody, planUnits, refuseForwarded, setElement } from "../forward/batch-plan";
import { forwardPlan } from "../forward/forward";
import { elementRefusal, refusalJson } from "../forward/refusals";
import { admit } from "../pipeline/admit";
import type { GatewayContext } from "../pipeline/context";
import { methodOf, type Pending } from "../pipeline/request";
import { type BatchItem, parseRpcBody, type RpcCall } from "../rpc/parse";
import { errorJson, nextRequestId, replyJson } from "../rpc/respond";
import { endByCategories, endByCategory } from "../telemetry/tracing";
import type { SubscriptionHubs } from "./hub";
import { isSubscriptionMethod, SUBSCRIBE, UNSUBSCRIBE } from "./methods";
import type { CustomSessionInit, UserData, WsSession } from "./session";
import { WsClose } from "./session";
import type { WsSessions } from "./sessions";
import { CAP_RETRY_AFTER_MS, WsLimitError } from "./upgrade";
import { WsRequest } from "./ws-request";

/** A local answer (subscribe / unsubscribe): its text, category, and what to run once it was sent. */
interface LocalAnswer {
  text: string;
  category: string;
  after?: () => void;
}

/** The extras of a whole-message refusal's error objects. */
interface WholeRefusal {
  row: ErrorRow;
  retryAfterMs?: number;
  limit?: number;
  message?: string;
}

/**
 * Text messages: parse, admission (the pipeline's, once per message with its request objects) and the
 * per-connection in-flight cap, then each request object through the pipeline (PipelineRequest), except
 * subscribe / unsubscribe, answered here through the subscription hubs. A refused message is answered
 * per request object with the refusal (the socket stays open). Custom endpoints (dedicated nodes) answer
 * their messages themselves, through the same pipeline (nodes/node-gateway.ts).
 */
export class WsMessages {
  /** Request objects being answered on every socket (the drain waits for them). */
  inFlightTotal = 0;
  closing = false;
  private drainWaiters: (() => void)[] = [];

  constructor(
    private readonly ctx: GatewayContext,
    private readonly sessions: WsSessions,
    private readonly hubs: SubscriptionHubs,
    private readonly countRefusal: (reason: string) => void,
  ) {}

  /** A message over MAX_BODY_BYTES: counted as a Client Error and the socket closed with 1009. */
  tooBig(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    const req = new WsRequest(this.ctx, this.sessions, s, nextRequestId(), performance.now());
    req.notification = true;
    req.fail(GatewayError.BodyTooLarge, "null");
    this.sessions.end(s, WsClose.TooBig);
  }

  onMessage(ws: uWS.WebSocket<UserData>, message: ArrayBuffer, isBinary: boolean): void {
    const s = ws.getUserData().session;
    if (s.ending) return;
    const req = new WsRequest(this.ctx, this.sessions, s, nextRequestId(), performance.now());
    if (isBinary) {
      req.fail(GatewayError.ParseError, "null");
      return;
    }
    const bytes = Buffer.from(message);
    const text = bytes.toString("utf8");
    // The bytes are uWS's, valid during this call only: the parse reads them now, nothing keeps them.
    const parsed = parseRpcBody(text, bytes);
    if (!parsed.ok) {
      req.fail(parsed.error, parsed.idText, parsed.limit);
      return;
    }
    const items: BatchItem[] = parsed.batch ? parsed.items : [parsed.call];
    if (!parsed.batch) req.method = parsed.call.method;
    if (this.closing) {
      // During the drain (see `drain`) a new message is answered with 503 `shutting_down` per request
      // object, before any work, and counted like any refusal: the drain then only waits for what was in
      // flight at the signal instead of running its full time under steady traffic.
      this.refuseEach(req, items, parsed.batch, { row: GatewayError.ShuttingDown });
      return;
    }
    // A message that parsed is a request: its span (when sampled) runs until its answer is sent.
    if (this.ctx.tracing.enabled)
      req.trace = this.ctx.tracing.start(
        s.spanName,
        s.traceparent,
        req.startedAt,
        "ws",
        s.slug,
        req.requestId,
      );
    const custom = s.custom;
    if (
      custom !== undefined &&
      (parsed.batch || s.target === undefined || !isSubscriptionMethod(parsed.call.method))
    ) {
      this.handleCustom(req, custom, text);
      return;
    }
    const n = items.length;
    let refusal: WholeRefusal | undefined = parsed.batch
      ? admit(req, n, undefined, items)
      : admit(req, n, parsed.call.method);
    const cap = this.ctx.config.WS_MAX_IN_FLIGHT_PER_CONNECTION;
    if (refusal === undefined && s.inFlight + n > cap) refusal = { row: WsLimitError.InFlight, limit: cap };
    if (refusal !== undefined) {
      this.refuseEach(req, items, parsed.batch, refusal);
      return;
    }
    s.inFlight += n;
    this.inFlightTotal += n;
    let work: Pending;
    try {
      work = parsed.batch
        ? this.batch(req, items, parsed.verbatim ? text : undefined)
        : this.single(req, parsed.call);
    } catch (err) {
      work = Promise.reject(err);
    }
    if (work instanceof Promise) {
      work.catch((err: unknown) => this.failed(req, err)).finally(() => this.settled(s, n));
    } else {
      this.settled(s, n);
    }
  }

  private failed(req: WsRequest, err: unknown): void {
    this.ctx.logger.error(
      { err, requestId: req.requestId, ...req.trace?.logFields() },
      "unhandled error in websocket pipeline",
    );
    req.notification = false;
    req.fail(GatewayError.Internal, "null");
  }

  /**
   * A whole message refused (limits, in-flight cap, shutting down): every request object is answered
   * with the refusal and counted under its method; nothing is forwarded.
   */
  private refuseEach(req: WsRequest, items: readonly BatchItem[], batch: boolean, r: WholeRefusal): void {
    const parts: string[] = [];
    const extras = {
      requestId: req.requestId,
      retryAfterMs: r.retryAfterMs,
      limit: r.limit,
      message: r.message,
    };
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      req.count(methodOf(it), r.row.category, r.row.reason, i, 1, 0);
      if (it.idText !== undefined) parts.push(errorJson(r.row, it.idText, extras));
    }
    if (req.trace !== undefined) endByCategory(req.trace, r.row.category, r.row.reason);
    req.trace = undefined;
    req.send(parts.length === 0 ? 204 : r.row.httpStatus, batch ? `[${parts.join(",")}]` : (parts[0] ?? ""));
  }

  /** A custom endpoint's own answer (its handler runs the pipeline itself). */
  private handleCustom(req: WsRequest, custom: CustomSessionInit, text: string): void {
    const s = req.session;
    const cap = this.ctx.config.WS_MAX_IN_FLIGHT_PER_CONNECTION;
    if (s.inFlight >= cap) {
      req.fail(WsLimitError.InFlight, "null", cap);
      return;
    }
    const { requestId, trace } = req;
    s.inFlight++;
    this.inFlightTotal++;
    custom
      .handle(text, requestId, trace)
      .then(
        (body) => {
          if (body !== undefined && body !== "") this.sessions.send(s, body);
        },
        (err: unknown) => {
          this.ctx.logger.error(
            { err, requestId, ...trace?.logFields() },
            "unhandled error in websocket endpoint handler",
          );
          if (trace !== undefined) endByCategory(trace, ErrorCategory.ServiceError, "internal");
          this.sessions.send(s, errorJson(GatewayError.Internal, "null", { requestId }));
        },
      )
      .finally(() => this.settled(s, 1));
  }

  private settled(s: WsSession, n: number): void {
    s.inFlight -= n;
    this.inFlightTotal -= n;
    if (this.inFlightTotal === 0 && this.drainWaiters.length > 0) {
      const w = this.drainWaiters;
      this.drainWaiters = [];
      for (const f of w) f();
    }
  }

  /** One call: subscribe / unsubscribe here, anything else through the pipeline (as over HTTP). */
  private single(req: WsRequest, call: RpcCall): Pending {
    req.notification = call.idText === undefined;
    if (SUBSCRIBE.has(call.method) || UNSUBSCRIBE.has(call.method)) return this.singleLocal(req, call);
    if (req.pool === undefined) return req.fail(GatewayError.Internal, call.idText ?? "null");
    return req.forwardSingle(call);
  }

  private async singleLocal(req: WsRequest, call: RpcCall): Promise<void> {
    const a = await this.local(req, call);
    req.count(call.method, a.category);
    if (call.idText !== undefined) req.served(1);
    req.send(200, a.text);
    a.after?.();
  }

  /** `text`: the message, when it may go upstream as it is (ParseResult `verbatim`). */
  private async batch(req: WsRequest, items: BatchItem[], text: string | undefined): Promise<void> {
    const n = items.length;
    const pool = req.pool!;
    const { policy, rules, requestId } = req;
    const plan = planBatch(
      items,
      requestId,
      (c) => elementRefusal(c, pool, policy, rules),
      isSubscriptionCall,
    );
    const pending: Promise<void>[] = [];
    // Subscription activations, run once the batch's answer is sent (as for a single subscribe).
    const after = new Array<(() => void) | undefined>(n);
    for (const i of plan.localIdx) {
      const it = items[i] as RpcCall;
      pending.push(
        this.local(req, it).then((a) => {
          setElement(plan, i, it.idText === undefined ? undefined : a.text, a.category);
          after[i] = a.after;
        }),
      );
    }
    if (plan.forward.length > 0) {
      pending.push(
        forwardPlan(req.deps, pool, req.flight, plan, requestId, text, req.trace).then((done) => {
          if (done.overCap === undefined) return;
          // Over a concurrency cap: every forwarded element gets the refusal (the others keep their answers).
          const reason = GatewayError.ConcurrencyLimit.reason;
          this.ctx.metrics.limitRefused(req.limitsEndpoint, reason, plan.forward.length);
          refuseForwarded(plan, done.overCap, requestId);
        }),
      );
    }
    await Promise.all(pending);
    if (req.trace !== undefined) {
      endByCategories(req.trace, plan.categories);
      req.trace = undefined;
    }
    req.countPlan(plan, items);
    const body = planBody(plan);
    if (body === "") req.send(204, "");
    else {
      req.served(planUnits(plan, items));
      req.send(200, body);
    }
    for (let i = 0; i < n; i++) after[i]?.();
  }

  /** Subscribe / unsubscribe: the method policy, the session's subscription budget, then the hub. */
  private async local(req: WsRequest, call: RpcCall): Promise<LocalAnswer> {
    const s = req.session;
    const requestId = req.requestId;
    const idText = call.idText ?? "null";
    const pool = s.pool;
    const spec = SUBSCRIBE.get(call.method);
    const family = spec === undefined ? UNSUBSCRIBE.get(call.method) : undefined;
    if (pool !== undefined) {
      const refused = elementRefusal(call, pool, req.policy, s.key?.access?.methods);
      if (refused !== undefined) {
        return { text: refusalJson(refused, idText, requestId), category: refused.row.category };
      }
    }
    if (spec !== undefined) {
      const max = this.ctx.config.WS_MAX_SUBSCRIPTIONS_PER_CONNECTION;
      if (s.subs.size >= max) {
        const row = WsLimitError.Subscriptions;
        return { text: errorJson(row, idText, { requestId, limit: max }), category: row.category };
      }
      const target = s.target;
      if (target === undefined || !target.record.upstreams.some((u) => u.wsUrl !== null && u.wsUrl !== "")) {
        const row = WsLimitError.NoSubscriptions;
        return { text: errorJson(row, idText, { requestId }), category: row.category };
      }
      const r = await this.hubs.for(target).subscribe(s, call.method, call.params, spec);
      if (r.ok) {
        return {
          text: replyJson(idText, `,"result":${JSON.stringify(r.id)}}`),
          category: ErrorCategory.Success,
          after: r.activate,
        };
      }
      if (r.row !== undefined) {
        if (r.limit !== undefined) this.countRefusal(r.row.reason);
        const x = {
          requestId,
          limit: r.limit,
          retryAfterMs: r.limit === undefined ? undefined : CAP_RETRY_AFTER_MS,
        };
        return { text: errorJson(r.row, idText, x), category: r.row.category };
      }
      return { text: replyJson(idText, r.tail), category: r.category };
    }
    const p = call.params;
    const id = Array.isArray(p) ? p[0] : undefined;
    const entry = typeof id === "string" ? s.subs.get(id) : undefined;
    const ok = entry !== undefined && entry.family === family;
    if (ok) entry.unsubscribe();
    return { text: replyJson(idText, `,"result":${ok}}`), category: ErrorCategory.Success };
  }

  /**
   * Refuses new messages from now on (503 `shutting_down`) and waits (up to `drainMs`) for the requests
   * in flight.
   */
  async drain(drainMs: number): Promise<void> {
    this.closing = true;
    if (this.inFlightTotal > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.drainWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

/** Batch elements the WebSocket transport answers itself: subscribe and unsubscribe calls. */
function isSubscriptionCall(call: RpcCall): boolean {
  return SUBSCRIBE.has(call.method) || UNSUBSCRIBE.has(call.method);
}
