import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { Endpoint, type GatewayContext } from "../pipeline/context";
import { errorJson, nextRequestId, STATUS } from "../rpc/respond";
import { allowHeadersFor } from "../server/cors";
import { type ExchangeTracker, RpcExchange } from "../server/exchange";

/**
 * HTTP on `/nodes/{nodeId}/{KEY}` and `/nodes/{nodeId}?apikey=KEY` (or header `apikey`): the route's own
 * part (CORS preflight, POST only, where the key is), then the same HTTP exchange as the app endpoints
 * (body intake, slow-body timeout, Content-Type and size checks, client address with TRUSTED_PROXIES,
 * X-Cache and rate-limit headers) with the node-key authorizer and the node's stage (node-gateway.ts).
 */
export function serveNodeHttp(
  ctx: GatewayContext,
  tracker: ExchangeTracker,
  res: HttpResponse,
  req: HttpRequest,
  keyInPath: boolean,
): void {
  const startedAt = performance.now();
  const method = req.getMethod();
  if (method === "options") {
    const origin = req.getHeader("origin");
    const allowHeaders = allowHeadersFor(req.getHeader("access-control-request-headers"));
    const requestId = nextRequestId();
    res.cork(() => {
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
    const requestId = nextRequestId();
    const row = GatewayError.MethodNotAllowed;
    res.cork(() => {
      res.writeStatus(STATUS[row.httpStatus]!);
      res.writeHeader("x-request-id", requestId);
      res.writeHeader("content-type", "application/json");
      res.end(errorJson(row, "null", { requestId }), tracker.closing);
    });
    return;
  }
  const nodeId = req.getParameter(0) ?? "";
  const apiKey = keyInPath
    ? decodePathKey(req.getParameter(1) ?? "")
    : req.getQuery("apikey") || req.getHeader("apikey");
  new RpcExchange(ctx, tracker, res, req, Endpoint.Node, undefined, startedAt, {
    nodeId,
    apiKey,
    keyInPath,
  }).start(req);
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
