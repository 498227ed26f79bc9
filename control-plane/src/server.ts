import "reflect-metadata";
import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { AddressInfo } from "node:net";
import { ApolloServer, HeaderMap } from "@apollo/server";
import { GraphQLError } from "graphql";
import { useServer as attachGraphqlWs } from "graphql-ws/use/ws";
import { DataSource } from "typeorm";
import { WebSocketServer } from "ws";
import { deriveEncryptionKey } from "../../shared/src/crypto/api-key";
import { createLogger, Logger } from "../../shared/src/log/logger";
import { createRedis, type RedisClient } from "../../shared/src/redis/connect";
import { clientIp, parseTrustedProxies } from "./auth/client-ip";
import { WsSessions } from "./auth/ws-sessions";
import { tooManyRequests } from "./common/errors";
import { rebindLegacyKeyCiphertexts } from "./common/key-ciphertext";
import { ControlPlaneConfig, redisTarget } from "./config";
import { isConsolePath, serveConsole } from "./console/static";
import { createDataSource, migrate } from "./db/data-source";
import { ensureDatabase } from "./db/ensure-database";
import { GqlContext } from "./graphql/context";
import { createFormatError, createWsErrorFormatting } from "./graphql/errors";
import { apolloArmor, createWsLimits } from "./graphql/limits";
import { GraphqlMetrics } from "./graphql/metrics";
import { buildControlPlaneSchema } from "./graphql/schema";
import { ReadinessCheck } from "./health/readiness";
import { createServices, Services } from "./services";

export interface ControlPlane {
  /** `http://127.0.0.1:PORT/graphql` */
  url: string;
  port: number;
  services: Services;
  dataSource: DataSource;
  redis: RedisClient;
  log: Logger;
  /** This instance's GraphQL series (graphql/metrics.ts); main.ts serves them on CONTROL_PLANE_METRICS_PORT. */
  metrics: GraphqlMetrics;
  close(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Host to bind (default: CONTROL_PLANE_HOST). */
  host?: string;
  /** Full re-publish into Redis after start (default true). */
  publishOnStart?: boolean;
  log?: Logger;
  /** Directory of the console's static build (default control-plane/console/dist). */
  consoleDir?: string;
}

function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        // Stop buffering; drain the rest so the 413 reaches the client, then the connection closes.
        req.removeAllListeners("data");
        req.resume();
        reject(Object.assign(new Error("body too large"), { status: 413 }));
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/**
 * Opens Postgres (runs migrations under the advisory lock) and Redis, publishes everything to Redis,
 * and serves GraphQL at `POST /graphql` (plus `GET /healthz`, liveness, and `GET /readyz`: 503 while Postgres or
 * Redis does not answer). `config.port` 0 picks a free port.
 */
export async function createControlPlane(
  config: ControlPlaneConfig,
  opts: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const log = opts.log ?? createLogger("control-plane", config.logLevel);
  if (await ensureDatabase(config.databaseUrl)) log.info("created the database");
  const ds = createDataSource(config.databaseUrl);
  await ds.initialize();
  const redis = createRedis(redisTarget(config), "cp-commands", { lazyConnect: true });
  // Redis down: publications are retried (PublicationService); one line per 10 s, not an unhandled error.
  let lastRedisError = 0;
  redis.on("error", (err: Error) => {
    if (Date.now() - lastRedisError < 10_000) return;
    lastRedisError = Date.now();
    log.warn({ err: err.message }, "redis connection error");
  });
  let httpServer: Server | undefined;
  let apollo: ApolloServer<GqlContext> | undefined;
  try {
    const applied = await migrate(ds);
    if (applied.length > 0) log.info({ applied }, "database migrations applied");
    await rebindLegacyKeyCiphertexts(ds, deriveEncryptionKey(config.keyEncryptionSecret), log);
    await redis.connect();
    // Set once listening (CONTROL_PLANE_PORT 0 picks a port): the default base of invitation links.
    let boundPort = config.port;
    const services = createServices(config, ds, redis, log, () => boundPort);
    if (opts.publishOnStart !== false) {
      const res = await services.publication.republishAllSerial();
      log.info(res, "published all records to Redis");
    }

    // Depth, aliases, tokens, cost, directives (GraphQL Armor); batched (array) bodies are refused.
    const armor = apolloArmor(config.graphqlLimits);
    const metrics = new GraphqlMetrics();
    apollo = new ApolloServer<GqlContext>({
      schema: await buildControlPlaneSchema(),
      formatError: createFormatError(log),
      includeStacktraceInErrorResponses: false,
      allowBatchedHttpRequests: false,
      plugins: [...armor.plugins, metrics.plugin()],
      validationRules: armor.validationRules,
      parseOptions: armor.parseOptions,
      // No automatic persisted queries: the console sends whole documents, and APQ would let any caller
      // fill a server-side document cache (and answers a hash mismatch with an uncoded error, i.e. a 500).
      persistedQueries: false,
      introspection: config.graphqlIntrospection,
      // Shutdown is ours (main.ts): Apollo must not install its own SIGTERM/SIGINT handlers.
      stopOnTerminationSignals: false,
    });
    await apollo.start();
    const server = apollo;
    const trustedProxies = parseTrustedProxies(config.trustedProxies);
    const readiness = new ReadinessCheck(ds, redis);

    const handle = async (req: IncomingMessage, res: ServerResponse) => {
      // The target is origin-form ("/path?query"): appended to the origin, so "//host/x" stays a path and
      // "/\\" cannot throw (as a relative reference it became a protocol-relative URL without a host:
      // TypeError, answered 500). Anything still unparsable (e.g. "*") is a bad request.
      let url: URL;
      try {
        url = new URL(`http://localhost${req.url ?? "/"}`);
      } catch {
        res.writeHead(400, { "content-type": "application/json" }).end('{"error":"bad request target"}');
        return;
      }
      if (url.pathname === "/healthz" && req.method === "GET") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
        return;
      }
      if (url.pathname === "/readyz" && req.method === "GET") {
        const r = await readiness.check();
        res
          .writeHead(r.ready ? 200 : 503, { "content-type": "application/json", "cache-control": "no-store" })
          .end(
            JSON.stringify({ status: r.ready ? "ready" : "not ready", postgres: r.postgres, redis: r.redis }),
          );
        return;
      }
      if (isConsolePath(url.pathname)) {
        await serveConsole(req, res, url.pathname, opts.consoleDir);
        return;
      }
      if (url.pathname !== "/graphql") {
        res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
        return;
      }
      const headers = new HeaderMap();
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
      }
      let body: unknown;
      if (req.method === "POST") {
        const raw = await readBody(req, config.graphqlMaxBodyBytes);
        try {
          body = raw.length > 0 ? JSON.parse(raw) : undefined;
        } catch {
          res.writeHead(400, { "content-type": "application/json" }).end(
            JSON.stringify({
              errors: [{ message: "Body is not JSON", extensions: { code: "BAD_REQUEST" } }],
            }),
          );
          return;
        }
      }
      const result = await server.executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: req.method ?? "GET", headers, search: url.search, body },
        context: async () => {
          const ip = clientIp(req.socket.remoteAddress, req.headers["x-forwarded-for"], trustedProxies);
          try {
            const principal = await services.auth.authenticate(req.headers.authorization);
            return { principal, ip, services, roles: new Map() };
          } catch (err) {
            if (err instanceof GraphQLError) {
              throw new GraphQLError(err.message, {
                extensions: { ...err.extensions, http: { status: 401 } },
              });
            }
            throw err;
          }
        },
      });
      for (const [k, v] of result.headers) res.setHeader(k, v);
      res.statusCode = result.status ?? 200;
      if (result.body.kind === "complete") {
        res.end(result.body.string);
      } else {
        for await (const chunk of result.body.asyncIterator) res.write(chunk);
        res.end();
      }
    };

    // Slow clients (headers dribbled in, a declared body that never comes) are cut off after
    // CONTROL_PLANE_HEADERS_TIMEOUT_MS / _REQUEST_TIMEOUT_MS; Node checks the deadlines every
    // connectionsCheckingInterval (its default, 30 s, would add up to 30 s to each).
    const checkMs = Math.min(1000, config.headersTimeoutMs);
    httpServer = createServer({ connectionsCheckingInterval: checkMs }, (req, res) => {
      handle(req, res).catch((err: { status?: number }) => {
        if (err?.status !== 413) log.error({ err }, "HTTP handler failed");
        if (!res.headersSent) {
          res
            .writeHead(err?.status === 413 ? 413 : 500, {
              "content-type": "application/json",
              connection: "close",
            })
            .end(
              JSON.stringify({
                errors: [{ message: err?.status === 413 ? "Body too large" : "Internal server error" }],
              }),
            );
        } else {
          res.end();
        }
      });
    });
    const srv = httpServer;
    srv.headersTimeout = config.headersTimeoutMs;
    srv.requestTimeout = config.requestTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      srv.once("error", reject);
      srv.listen(config.port, opts.host ?? config.host, () => resolve());
    });
    // graphql-ws subscriptions on the same path (`dedicatedNodeStatus`); the token comes in connectionParams.
    // A message over the cap closes its socket with 1009 (ws) before it is buffered whole.
    const wss = new WebSocketServer({
      server: srv,
      path: "/graphql",
      maxPayload: config.graphqlMaxBodyBytes,
    });
    // Errors over graphql-ws go through the same masking as Apollo's formatError (createWsErrorFormatting).
    const wsErrors = createWsErrorFormatting(log);
    const wsLimits = createWsLimits(config.graphqlLimits, config.graphqlIntrospection);
    const wsSessions = new WsSessions(services.auth, config.graphqlWsAuthRecheckMs, log);
    const wsSchema = await buildControlPlaneSchema();
    const wsServer = attachGraphqlWs<Record<string, unknown>>(
      {
        schema: wsSchema,
        // Authentication at connect: no token or a bad one closes the socket with 4401 before any
        // operation; the connection is then closed when its token is revoked or expires (WsSessions).
        onConnect: async (c) => (await wsSessions.connect(c.extra.socket, c.connectionParams)) !== null,
        // The HTTP limits (tokens, depth, aliases, cost, introspection) for every operation over the socket.
        onSubscribe: (c, _id, payload) => {
          // graphql-ws has registered this operation already; each live one holds a status listener.
          const running = Object.keys(c.subscriptions).length;
          if (running > config.graphqlWsMaxOperations) {
            return [
              tooManyRequests(
                `At most ${config.graphqlWsMaxOperations} operations may run at once on one connection`,
                1,
              ),
            ];
          }
          const document = wsLimits.parse(payload.query);
          if (!("kind" in document)) return document;
          const errors = wsLimits.validate(wsSchema, document, payload.operationName, payload.variables);
          if (errors.length > 0) return errors;
          return {
            schema: wsSchema,
            document,
            operationName: payload.operationName,
            variableValues: payload.variables,
          };
        },
        onNext: wsErrors.onNext,
        onError: wsErrors.onError,
        context: wsErrors.context(async (c): Promise<GqlContext> => {
          const p = c.connectionParams ?? {};
          const auth = p.authorization ?? p.Authorization;
          const principal = await services.auth.authenticate(typeof auth === "string" ? auth : undefined);
          const ip = clientIp(
            c.extra.request.socket.remoteAddress,
            c.extra.request.headers["x-forwarded-for"],
            trustedProxies,
          );
          return { principal, ip, services };
        }),
      },
      wss,
    );
    // graphql-ws's adapter prints every socket error with console.error ("Internal error ... check your
    // implementation"), including a client's message over maxPayload, which ws has already answered with
    // a 1009 close: swap it for a debug line, so hostile clients can't fill stderr.
    wss.on("connection", (socket) => {
      socket.removeAllListeners("error");
      socket.on("error", (err) => log.debug({ err: err.message }, "graphql-ws socket error"));
    });
    const port = (srv.address() as AddressInfo).port;
    boundPort = port;
    const url = `http://127.0.0.1:${port}/graphql`;
    log.info({ port }, "control plane listening");

    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      services,
      dataSource: ds,
      redis,
      log,
      metrics,
      close() {
        closing ??= (async () => {
          wsSessions.close();
          await wsServer.dispose();
          await new Promise<void>((resolve) => wss.close(() => resolve()));
          await services.nodes.close();
          await services.webhooks.close();
          await new Promise<void>((resolve) => {
            srv.close(() => resolve());
            srv.closeIdleConnections();
            setTimeout(() => srv.closeAllConnections(), 2000).unref();
          });
          log.debug("http server closed");
          await server.stop();
          log.debug("apollo stopped");
          services.publication.stop();
          await redis.quit().catch(() => redis.disconnect());
          log.debug("redis closed");
          await ds.destroy();
          log.debug("database closed");
        })();
        return closing;
      },
    };
  } catch (err) {
    httpServer?.close();
    await apollo?.stop().catch(() => undefined);
    redis.disconnect();
    await ds.destroy().catch(() => undefined);
    throw err;
  }
}
