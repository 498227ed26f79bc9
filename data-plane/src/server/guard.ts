import type uWS from "uWebSockets.js";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { Metrics } from "../metrics/metrics";
import { errorJson, nextRequestId, STATUS } from "../rpc/respond";

type HttpHandler = (res: uWS.HttpResponse, req: uWS.HttpRequest) => void;

/** Close code for a socket whose handler threw (RFC 6455 "internal error"). */
export const WS_INTERNAL_ERROR = { code: 1011, reason: "internal error" } as const;

/**
 * Keeps an exception thrown by a route or WebSocket handler from escaping into uWS. An exception that
 * reaches uWS ends the process (it becomes an uncaught exception, and a request handler that returns
 * without answering or attaching onAborted makes uWS call std::terminate), so one bad request would stop
 * the data plane for everyone.
 *
 * Each wrapper is built once, at route registration: per request the cost is one try/catch, no closure.
 * A caught exception answers 500 with the Service Error row (or closes that one socket), is logged with
 * the request id and counted in `rpcgw_handler_exceptions_total{handler}`.
 */
export class HandlerGuard {
  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {}

  /** A route handler that cannot throw into uWS. */
  http(handler: string, fn: HttpHandler): HttpHandler {
    return (res, req) => {
      try {
        fn(res, req);
      } catch (err) {
        this.httpFailed(handler, res, err);
      }
    };
  }

  /**
   * Logs and counts `err`, then answers 500 Internal unless the response is already written or aborted
   * (uWS throws on any access to such a response: caught here, nothing else to do), or closes the
   * connection when even that fails mid-write. Never throws. Also for rejections of work a handler started.
   */
  httpFailed(handler: string, res: uWS.HttpResponse, err: unknown, requestId = nextRequestId()): void {
    this.report(handler, err, requestId);
    try {
      res.cork(() => {
        res.writeStatus(STATUS[500]!);
        res.writeHeader("x-request-id", requestId);
        res.writeHeader("content-type", "application/json");
        res.end(errorJson(GatewayError.Internal, "null", { requestId }), true);
      });
    } catch {
      // Already answered or aborted (uWS refuses the access): nothing is waiting for an answer.
    }
  }

  /**
   * The WebSocket behaviour of a route with every handler guarded. A throwing `open` or `message` closes
   * that one socket with 1011; a throwing `upgrade` answers 500; a throwing `close` or `drain` is logged
   * and counted (the socket is going away or can go on).
   */
  ws<T>(handler: string, b: uWS.WebSocketBehavior<T>): uWS.WebSocketBehavior<T> {
    const out: uWS.WebSocketBehavior<T> = { ...b };
    const { upgrade, open, message, drain, close } = b;
    if (upgrade !== undefined) {
      out.upgrade = (res, req, context) => {
        try {
          upgrade(res, req, context);
        } catch (err) {
          this.httpFailed(`${handler}.upgrade`, res, err);
        }
      };
    }
    if (open !== undefined) {
      out.open = (ws) => {
        try {
          open(ws);
        } catch (err) {
          this.wsFailed(`${handler}.open`, ws, err);
        }
      };
    }
    if (message !== undefined) {
      out.message = (ws, msg, isBinary) => {
        try {
          message(ws, msg, isBinary);
        } catch (err) {
          this.wsFailed(`${handler}.message`, ws, err);
        }
      };
    }
    if (drain !== undefined) {
      out.drain = (ws) => {
        try {
          drain(ws);
        } catch (err) {
          this.report(`${handler}.drain`, err, nextRequestId());
        }
      };
    }
    if (close !== undefined) {
      out.close = (ws, code, reason) => {
        try {
          close(ws, code, reason);
        } catch (err) {
          this.report(`${handler}.close`, err, nextRequestId());
        }
      };
    }
    return out;
  }

  /** Logs and counts `err`, then closes that one socket with 1011. Never throws. */
  wsFailed<T>(handler: string, ws: uWS.WebSocket<T>, err: unknown, requestId = nextRequestId()): void {
    this.report(handler, err, requestId);
    try {
      ws.end(WS_INTERNAL_ERROR.code, WS_INTERNAL_ERROR.reason);
    } catch {
      // Already closed: uWS refuses the access.
    }
  }

  /** Log line + metric for an exception a handler let through. Never throws. */
  report(handler: string, err: unknown, requestId: string): void {
    try {
      this.metrics.handlerException(handler);
      this.logger.error({ err, requestId, handler }, "handler threw; answered 500 / closed the socket");
    } catch {
      // A broken logger must not take the process down either.
    }
  }
}
