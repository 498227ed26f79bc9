import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import { type Cidr, clientIp, ipBucket, parseIp } from "../allowlist/ip";
import { rateLimitHeaders } from "../limits/admission";
import type { RateLimitResult } from "../ratelimit/rate-limiter";
import { allowHeadersFor } from "../server/cors";
import type { HandlerGuard } from "../server/guard";
import { requestIdFor } from "../server/request-id";
import { errorJson, STATUS } from "../server/respond";
import { endByStatus, NO_TRACING, type RequestTrace, type RequestTracing } from "../telemetry/tracing";
import type { NodeGateway } from "./node-gateway";

export interface NodeHttpTracker {
  readonly closing: boolean;
  begin(): void;
  end(): void;
}

/**
 * HTTP on `/nodes/{nodeId}/{KEY}` and `/nodes/{nodeId}?apikey=KEY` (or header `apikey`). Everything needed
 * from `req` is read before the handler returns; every later write is corked.
 */
export function serveNodeHttp(
  gateway: NodeGateway,
  tracker: NodeHttpTracker,
  guard: HandlerGuard,
  maxBodyBytes: number,
  res: HttpResponse,
  req: HttpRequest,
  keyInPath: boolean,
  tracing: RequestTracing = NO_TRACING,
  /** TRUSTED_PROXIES: whose X-Forwarded-For names the client (for the key look-up throttle). */
  trustedProxies: readonly Cidr[] = [],
): void {
  const startedAt = performance.now();
  const requestId = requestIdFor(req.getHeader("x-request-id"));
  const nodeId = req.getParameter(0) ?? "";
  const apiKey = keyInPath
    ? decodePathKey(req.getParameter(1) ?? "")
    : req.getQuery("apikey") || req.getHeader("apikey");
  const origin = req.getHeader("origin");
  const forwardedFor = trustedProxies.length > 0 ? req.getHeader("x-forwarded-for") : "";
  const method = req.getMethod();
  const allowHeaders =
    method === "options" ? allowHeadersFor(req.getHeader("access-control-request-headers")) : "";
  let aborted = false;
  let done = false;
  /** The request's span when sampled (started once it is a POST to forward), ended by its answer. */
  let trace: RequestTrace | undefined;
  tracker.begin();
  res.onAborted(() => {
    aborted = true;
    if (trace !== undefined) {
      trace.end({ "http.response.status_code": 499 }, "aborted");
      trace = undefined;
    }
    finish();
  });
  function finish() {
    if (done) return;
    done = true;
    tracker.end();
  }
  /**
   * Writes the one answer of this request, corked. A write that throws part-way (a header or the status
   * may already be out, so no clean 500 can follow) closes the connection instead: the client sees the
   * connection end rather than waiting forever. Either way the request is settled exactly once (`finish`
   * in `finally`: a throw cannot leave it counted in flight, and a later `send` is a no-op).
   */
  function answer(write: () => void) {
    if (done) return;
    try {
      if (!aborted) res.cork(write);
    } catch (err) {
      guard.report("node.send", err, requestId);
      try {
        if (!aborted) res.close();
      } catch {
        // uWS refuses access to a response already ended or aborted: nothing is waiting on it.
      }
    } finally {
      finish();
    }
  }
  function send(
    status: number,
    body: string | Uint8Array,
    retryAfterSeconds?: number,
    rate?: RateLimitResult,
  ) {
    if (trace !== undefined) {
      endByStatus(trace, status);
      trace = undefined;
    }
    answer(() => {
      res.writeStatus(STATUS[status] ?? `${status} Error`);
      res.writeHeader("x-request-id", requestId);
      if (origin !== "") {
        res.writeHeader("access-control-allow-origin", origin);
        res.writeHeader(
          "access-control-expose-headers",
          "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, Retry-After",
        );
        res.writeHeader("vary", "Origin");
      }
      const rl = rateLimitHeaders(rate);
      if (rl !== undefined) {
        res.writeHeader("x-ratelimit-limit", rl[0]);
        res.writeHeader("x-ratelimit-remaining", rl[1]);
      }
      if (retryAfterSeconds !== undefined) res.writeHeader("retry-after", String(retryAfterSeconds));
      if (status === 204) {
        res.endWithoutBody(0, tracker.closing);
      } else {
        res.writeHeader("content-type", "application/json");
        res.end(body, tracker.closing);
      }
    });
  }
  const failWith = (row: ErrorRow) => send(row.httpStatus, errorJson(row, "null", { requestId }));

  if (method === "options") {
    answer(() => {
      res.writeStatus(STATUS[204]!);
      res.writeHeader("x-request-id", requestId);
      if (origin !== "") {
        res.writeHeader("access-control-allow-origin", origin);
        res.writeHeader("vary", "Origin");
      }
      res.writeHeader("access-control-allow-methods", "POST, OPTIONS");
      res.writeHeader("access-control-allow-headers", allowHeaders);
      res.writeHeader("vary", "Access-Control-Request-Headers");
      res.writeHeader("access-control-max-age", "600");
      res.endWithoutBody(0);
    });
    return;
  }
  if (method !== "post") {
    failWith(GatewayError.MethodNotAllowed);
    return;
  }
  const ct = req.getHeader("content-type").toLowerCase();
  if (!ct.startsWith("application/json")) {
    failWith(GatewayError.UnsupportedMediaType);
    return;
  }
  const declared = req.getHeader("content-length");
  if (declared !== "" && Number(declared) > maxBodyBytes) {
    failWith(GatewayError.BodyTooLarge);
    return;
  }

  // The span starts with the request (its key check included) once it is a POST worth forwarding.
  if (tracing.enabled) {
    trace = tracing.start(
      keyInPath ? "POST /nodes/{nodeId}/{key}" : "POST /nodes/{nodeId}",
      req.getHeader("traceparent"),
      startedAt,
      "http",
      `node:${nodeId}`,
      requestId,
    );
  }
  // A rejected step answers 500 Internal (logged and counted by the guard) unless already answered.
  const pipelineError = (err: unknown) => {
    guard.report("node.pipeline", err, requestId);
    failWith(GatewayError.Internal);
  };
  const t0 = trace === undefined ? 0 : performance.now();
  const auth = gateway.authorize(nodeId, apiKey, () =>
    ipBucket(
      clientIp(Buffer.from(res.getRemoteAddressAsText()).toString("latin1"), forwardedFor, trustedProxies),
    ),
  );
  if (trace !== undefined) {
    const t = trace;
    auth.then(
      (a) => t.step("key.verify", t0, { "key.valid": a.ok }),
      () => {},
    );
  }
  // Awaited once the body is in; handled here too so a failed lookup of an aborted request is not an
  // unhandled rejection.
  auth.catch(() => {});
  const chunks: Buffer[] = [];
  let bytes = 0;
  res.onData((chunk, isLast) => {
    try {
      if (done) return;
      bytes += chunk.byteLength;
      if (bytes > maxBodyBytes) return failWith(GatewayError.BodyTooLarge);
      chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      if (!isLast) return;
      const text = Buffer.concat(chunks).toString("utf8");
      void (async () => {
        const a = await auth;
        if (aborted) return;
        if (!a.ok) {
          if (a.retryAfterMs === undefined) return failWith(a.error);
          const r = a.retryAfterMs;
          return send(
            a.error.httpStatus,
            errorJson(a.error, "null", { requestId, retryAfterMs: r }),
            Math.ceil(r / 1000),
          );
        }
        const reply = await gateway.handle(
          a,
          text,
          requestId,
          () => {
            if (aborted) return null;
            const addr = parseIp(Buffer.from(res.getRemoteAddressAsText()).toString("latin1"));
            return addr === undefined ? null : logAddressPrefix(addr);
          },
          false,
          trace,
        );
        send(reply.status, reply.body, reply.retryAfterSeconds, reply.rate);
      })().catch(pipelineError);
    } catch (err) {
      pipelineError(err);
    }
  });
}

/**
 * The key as sent in the path, percent-decoded. A malformed escape (`%`, `%zz`, an overlong UTF-8
 * sequence such as `%C0%AF`) cannot be anyone's key: it is kept as sent, so the lookup finds no such
 * key and the request gets the 401 row like any unknown key.
 */
export function decodePathKey(raw: string): string {
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
