import uWS from "uWebSockets.js";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import { OTHER_METHOD, UNKNOWN_NETWORK } from "../../../shared/src/usage/contract";
import { clientIp } from "../allowlist/ip";
import type { VerifiedKey, VerifyResult } from "../auth/key-verifier";
import { decodePathKey, serveNodeHttp } from "../nodes/node-http";
import { nodeUsageNetwork, RequestAccount } from "../pipeline/account";
import { Endpoint, type GatewayContext } from "../pipeline/context";
import { errorJson, nextRequestId, STATUS } from "../rpc/respond";
import { allowHeadersFor } from "./cors";
import { type ExchangeTracker, RpcExchange } from "./exchange";
import { HandlerGuard } from "./guard";

const ALLOW_METHODS = "POST, OPTIONS";
/** `authorization`: apps that require a JWT are called with `Authorization: Bearer <jwt>` from browsers too. */

/** Which route a request refused during the drain came in on (where its key is, if any). */
const DrainRoute = { App: 0, Public: 1, NodePath: 2, NodeQuery: 3 } as const;
type DrainRoute = (typeof DrainRoute)[keyof typeof DrainRoute];

export interface HttpServerHooks {
  ready(): boolean;
  /** The serving thread's index (DATA_PLANE_THREADS > 1), named in the /healthz answer. */
  thread?: number;
}

/**
 * The uWS app: routes and the request lifecycle bookkeeping (in-flight set for draining, slow-body
 * sweep). RPC work happens in RpcExchange.
 */
export class HttpServer implements ExchangeTracker {
  readonly app: uWS.TemplatedApp;
  /** Every route below is registered through it: no exception escapes into uWS (see guard.ts). */
  readonly guard: HandlerGuard;
  closing = false;
  /** Once the HTTP drain ended (see `close`): requests are refused with 503 `shutting_down` before any work. */
  private refusing = false;
  private live = 0;
  private readonly slowBodies = new Set<RpcExchange>();
  private listenSocket: uWS.us_listen_socket | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] = [];

  constructor(
    private readonly ctx: GatewayContext,
    private readonly hooks: HttpServerHooks,
  ) {
    const app = uWS.App();
    this.app = app;
    const guard = new HandlerGuard(ctx.logger, ctx.metrics);
    this.guard = guard;
    // One route per method (uWS prefers a method's own route over `any`): the POST path reads no method.
    for (const [path, endpoint] of [
      ["/:network/rpc", Endpoint.App],
      ["/:network/jsonrpc", Endpoint.App],
      ["/:network/public", Endpoint.Public],
    ] as const) {
      app.post(
        path,
        guard.http("rpc", (res, req) => this.rpc(res, req, endpoint, "post")),
      );
      app.options(
        path,
        guard.http("rpc", (res, req) => this.rpc(res, req, endpoint, "options")),
      );
      app.any(
        path,
        guard.http("rpc", (res, req) => this.rpc(res, req, endpoint, "other")),
      );
    }
    const nodes = ctx.nodes;
    if (nodes !== undefined) {
      // The key in the path, or in `?apikey=` / the `apikey` header.
      for (const [path, keyInPath] of [
        ["/nodes/:nodeId/:key", true],
        ["/nodes/:nodeId", false],
      ] as const) {
        app.any(
          path,
          guard.http("node", (res, req) =>
            this.refusing
              ? this.shuttingDown(res, req, keyInPath ? DrainRoute.NodePath : DrainRoute.NodeQuery)
              : serveNodeHttp(ctx, this, res, req, keyInPath),
          ),
        );
      }
    }
    const health =
      hooks.thread === undefined ? '{"status":"ok"}' : `{"status":"ok","thread":${hooks.thread}}`;
    app.get(
      "/healthz",
      guard.http("healthz", (res) => {
        res.cork(() => {
          res.writeStatus(STATUS[200]!);
          res.writeHeader("x-request-id", nextRequestId());
          res.writeHeader("content-type", "application/json");
          res.end(health);
        });
      }),
    );
    app.get(
      "/readyz",
      guard.http("readyz", (res) => {
        const ok = this.hooks.ready() && !this.closing;
        res.cork(() => {
          res.writeStatus(STATUS[ok ? 200 : 503]!);
          res.writeHeader("x-request-id", nextRequestId());
          res.writeHeader("content-type", "application/json");
          res.end(ok ? '{"status":"ready"}' : '{"status":"not ready"}');
        });
      }),
    );
    // No /metrics here: it names every network, upstream and node, and is served on METRICS_PORT only
    // (shared/src/metrics/server.ts); on this port it is an unknown path (404) like any other.
    app.any(
      "/*",
      guard.http("notFound", (res) => this.plainError(res, GatewayError.NotFound)),
    );
  }

  private plainError(res: uWS.HttpResponse, row: ErrorRow, requestId = nextRequestId()): void {
    res.cork(() => {
      res.writeStatus(STATUS[row.httpStatus]!);
      res.writeHeader("x-request-id", requestId);
      res.writeHeader("content-type", "application/json");
      res.end(errorJson(row, "null", { requestId }), this.closing);
    });
  }

  /**
   * 503 `shutting_down` with `Connection: close`, before any work, counted like any answer (usage, metrics,
   * request log) under the request's app (node) when its key is known: the key is read from the key cache
   * (Redis only when not cached), and the final flush, which comes after `finish`, counts it.
   */
  private shuttingDown(res: uWS.HttpResponse, req: uWS.HttpRequest, route: DrainRoute): void {
    const started = performance.now();
    let network = UNKNOWN_NETWORK;
    let metricsNetwork = "";
    let apiKey = "";
    let nodeId: string | undefined;
    if (route === DrainRoute.NodePath || route === DrainRoute.NodeQuery) {
      nodeId = req.getParameter(0) ?? "";
      network = nodeUsageNetwork(nodeId);
      apiKey =
        route === DrainRoute.NodePath
          ? decodePathKey(req.getParameter(1) ?? "")
          : req.getQuery("apikey") || req.getHeader("apikey");
    } else {
      const pool = this.ctx.upstreams.get(req.getParameter(0) ?? "");
      if (pool !== undefined) {
        network = metricsNetwork = pool.slug;
        if (route === DrainRoute.App) apiKey = req.getQuery("apikey") || req.getHeader("apikey");
      }
    }
    const forwardedFor = this.ctx.trustedProxies.length > 0 ? req.getHeader("x-forwarded-for") : "";
    const account = new RequestAccount(
      this.ctx,
      nodeId === undefined ? "http" : "node",
      nextRequestId(),
      network,
      metricsNetwork,
      started,
    );
    const answer = (v: VerifyResult | undefined) => {
      const rec = v?.ok ? v.key.record : undefined;
      if (rec !== undefined && (nodeId === undefined ? rec.kind === "app" : rec.nodeId === nodeId))
        account.key = (v as { key: VerifiedKey }).key;
      const row = GatewayError.ShuttingDown;
      account.count(OTHER_METHOD, row.category, row.reason);
      if (account.hasLogRows) {
        const peer = Buffer.from(res.getRemoteAddressAsText()).toString("latin1");
        const addr = clientIp(peer, forwardedFor, this.ctx.trustedProxies);
        account.logged(row.httpStatus, addr === undefined ? null : logAddressPrefix(addr));
      }
      this.plainError(res, row, account.requestId);
    };
    if (apiKey === "") {
      answer(undefined);
      return;
    }
    const v = this.ctx.verifier.verify(apiKey, Date.now());
    if (!(v instanceof Promise)) {
      answer(v);
      return;
    }
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    v.then(
      (r) => {
        if (!aborted) answer(r);
      },
      () => {
        if (!aborted) answer(undefined);
      },
    ).catch((err: unknown) => {
      if (!aborted) this.guard.httpFailed("rpc.shutdown", res, err);
    });
  }

  /** A request refused before any key is read (unknown network, not a POST): counted, then answered. */
  private refusePlain(
    res: uWS.HttpResponse,
    req: uWS.HttpRequest,
    row: ErrorRow,
    network: string,
    metricsNetwork: string,
    started: number,
  ): void {
    const account = new RequestAccount(this.ctx, "http", nextRequestId(), network, metricsNetwork, started);
    account.count(OTHER_METHOD, row.category, row.reason);
    if (account.hasLogRows) {
      const trusted = this.ctx.trustedProxies;
      const fwd = trusted.length > 0 ? req.getHeader("x-forwarded-for") : "";
      const addr = clientIp(Buffer.from(res.getRemoteAddressAsText()).toString("latin1"), fwd, trusted);
      account.logged(row.httpStatus, addr === undefined ? null : logAddressPrefix(addr));
    }
    this.plainError(res, row, account.requestId);
  }

  private rpc(
    res: uWS.HttpResponse,
    req: uWS.HttpRequest,
    endpoint: Endpoint,
    method: "post" | "options" | "other",
  ): void {
    if (this.refusing) {
      this.shuttingDown(res, req, endpoint === Endpoint.App ? DrainRoute.App : DrainRoute.Public);
      return;
    }
    const started = performance.now();
    const pool = this.ctx.upstreams.get(req.getParameter(0) ?? "");
    if (pool === undefined) {
      // Unknown network: counted (no app, method "other") under the network "unknown".
      this.refusePlain(res, req, GatewayError.NotFound, UNKNOWN_NETWORK, "", started);
      return;
    }
    if (method === "options") {
      this.preflight(res, req, endpoint);
      return;
    }
    if (method !== "post") {
      this.refusePlain(res, req, GatewayError.MethodNotAllowed, pool.slug, pool.slug, started);
      return;
    }
    new RpcExchange(this.ctx, this, res, req, endpoint, pool, started).start(req);
  }

  /**
   * CORS preflight. Browsers send no custom headers on a preflight, so the key is only known when it is in
   * the query string: then a refused origin gets 403 and no CORS headers. Without it, the preflight is
   * allowed and the real request is checked.
   */
  private preflight(res: uWS.HttpResponse, req: uWS.HttpRequest, endpoint: Endpoint): void {
    const origin = req.getHeader("origin");
    // Read now: `req` is invalid once this handler returns, and the answer may wait for the key lookup.
    const allowHeaders = allowHeadersFor(req.getHeader("access-control-request-headers"));
    const requestId = nextRequestId();
    const answer = (allowed: boolean) => {
      res.cork(() => {
        if (!allowed) {
          res.writeStatus(STATUS[403]!);
          res.writeHeader("x-request-id", requestId);
          res.writeHeader("content-type", "application/json");
          res.end(errorJson(GatewayError.OriginNotAllowed, "null", { requestId }));
          return;
        }
        res.writeStatus(STATUS[204]!);
        res.writeHeader("x-request-id", requestId);
        if (origin !== "") {
          res.writeHeader("access-control-allow-origin", endpoint === Endpoint.Public ? "*" : origin);
          if (endpoint !== Endpoint.Public) res.writeHeader("vary", "Origin");
        }
        res.writeHeader("access-control-allow-methods", ALLOW_METHODS);
        res.writeHeader("access-control-allow-headers", allowHeaders);
        res.writeHeader("vary", "Access-Control-Request-Headers");
        res.writeHeader("access-control-max-age", "600");
        res.endWithoutBody(0);
      });
    };
    const key = endpoint === Endpoint.App ? req.getQuery("apikey") : "";
    if (!key) {
      answer(true);
      return;
    }
    const v = this.ctx.verifier.verify(key, Date.now());
    if (!(v instanceof Promise)) {
      answer(!v.ok || !v.key.allowlist.restrictsOrigin || v.key.allowlist.originAllowed(origin));
      return;
    }
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    v.then((r) => {
      if (!aborted)
        answer(!r.ok || !r.key.allowlist.restrictsOrigin || r.key.allowlist.originAllowed(origin));
    }).catch((err: unknown) => {
      if (!aborted) this.guard.httpFailed("rpc.preflight", res, err, requestId);
    });
  }

  begin(): void {
    this.live++;
  }

  end(): void {
    this.live--;
    if (this.live === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  watchBody(x: RpcExchange): void {
    this.slowBodies.add(x);
  }

  unwatchBody(x: RpcExchange): void {
    this.slowBodies.delete(x);
  }

  get inFlight(): number {
    return this.live;
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (socket) => {
        if (socket === false) return reject(new Error(`data plane could not listen on ${host}:${port}`));
        this.listenSocket = socket;
        resolve(uWS.us_socket_local_port(socket));
      });
      const bodyTimeout = this.ctx.config.BODY_TIMEOUT_MS;
      this.sweepTimer = setInterval(
        () => {
          const cutoff = Date.now() - bodyTimeout;
          for (const x of this.slowBodies) if (x.bodyStartedAtMs < cutoff) x.timeOut();
        },
        Math.min(1000, bodyTimeout),
      );
      this.sweepTimer.unref();
    });
  }

  /**
   * Closes the listen socket only: new connections are refused, open ones are served as before (no
   * `Connection: close`). Lets every thread of a process close its listen socket before any starts the
   * drain, whose `Connection: close` answers send clients to reconnect: while one thread still listened,
   * they would land in its accept queue, which is reset (not refused) when it closes in turn.
   */
  stopListening(): void {
    if (this.listenSocket !== undefined) {
      uWS.us_listen_socket_close(this.listenSocket);
      this.listenSocket = undefined;
    }
  }

  /**
   * Stops accepting connections, then waits (up to `drainMs`) for in-flight requests to finish. Requests
   * arriving meanwhile on kept-alive connections are served (answered with `Connection: close`, so each
   * such connection carries at most one more). The moment the drain ends (in-flight reached 0, or
   * `drainMs` ran out) new requests are refused (503 `shutting_down`, see `linger`): the WebSocket drain
   * may run on, and a request served after this point could still be in flight when `finish` closes every
   * connection. Set synchronously in the waiter, so no request can start between the drain's end and it.
   */
  async close(drainMs: number): Promise<void> {
    this.closing = true;
    this.stopListening();
    if (this.live > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.refusing = true;
          resolve();
        }, drainMs);
        this.drainWaiters.push(() => {
          clearTimeout(timer);
          this.refusing = true;
          resolve();
        });
      });
    }
    this.refusing = true;
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
  }

  /**
   * After the drain: for `lingerMs`, requests still arriving on connections opened before the signal are
   * refused (503, `Connection: close`, counted) instead of served. Requests still in flight then (only
   * those the drain ran out on: nothing starts once refusing) get up to `lingerMs` more to be answered.
   * Returns how many are still in flight after that: `closeAll` cuts them.
   */
  async linger(lingerMs: number): Promise<number> {
    this.closing = true;
    this.refusing = true;
    if (lingerMs > 0) await new Promise((r) => setTimeout(r, lingerMs));
    if (this.live > 0 && lingerMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, lingerMs);
        this.drainWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.live;
  }

  /**
   * Closes every connection (HTTP and WebSocket), so that no request can be answered after the final usage
   * flush that follows.
   */
  closeAll(): void {
    this.closing = true;
    this.refusing = true;
    // Present at runtime in this uWS build, missing from its typings: closes the listen socket and every
    // open connection.
    (this.app as unknown as { close?: () => void }).close?.();
  }
}
