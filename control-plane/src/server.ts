import "reflect-metadata";
import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { AddressInfo } from "node:net";
import { ApolloServer, HeaderMap } from "@apollo/server";
import { GraphQLError } from "graphql";
import { useServer as attachGraphqlWs } from "graphql-ws/use/ws";
import { Redis } from "ioredis";
import { DataSource } from "typeorm";
import { WebSocketServer } from "ws";
import { createLogger, Logger } from "../../shared/src/log/logger";
import { clientIp, parseTrustedProxies } from "./auth/client-ip";
import { ControlPlaneConfig } from "./config";
import { isConsolePath, serveConsole } from "./console/static";
import { createDataSource, migrate } from "./db/data-source";
import { ensureDatabase } from "./db/ensure-database";
import { GqlContext } from "./graphql/context";
import { createFormatError, createWsErrorFormatting } from "./graphql/errors";
import { buildControlPlaneSchema } from "./graphql/schema";
import { createServices, Services } from "./services";

export const MAX_BODY_BYTES = 1024 * 1024;

export interface ControlPlane {
  /** `http://127.0.0.1:PORT/graphql` */
  url: string;
  port: number;
  services: Services;
  dataSource: DataSource;
  redis: Redis;
  log: Logger;
  close(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Host to bind (default 0.0.0.0). */
  host?: string;
  /** Full re-publish into Redis after start (default true). */
  publishOnStart?: boolean;
  log?: Logger;
  /** Directory of the console's static build (default control-plane/console/dist). */
  consoleDir?: string;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
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
 * and serves GraphQL at `POST /graphql` (plus `GET /healthz`). `config.port` 0 picks a free port.
 */
export async function createControlPlane(
  config: ControlPlaneConfig,
  opts: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const log = opts.log ?? createLogger("control-plane", config.logLevel);
  if (await ensureDatabase(config.databaseUrl)) log.info("created the database");
  const ds = createDataSource(config.databaseUrl);
  await ds.initialize();
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, lazyConnect: true });
  let httpServer: Server | undefined;
  let apollo: ApolloServer<GqlContext> | undefined;
  try {
    const applied = await migrate(ds);
    if (applied.length > 0) log.info({ applied }, "database migrations applied");
    await redis.connect();
    const services = createServices(config, ds, redis, log);
    if (opts.publishOnStart !== false) {
      const res = await services.publication.republishAllSerial();
      log.info(res, "published all records to Redis");
    }

    apollo = new ApolloServer<GqlContext>({
      schema: await buildControlPlaneSchema(),
      formatError: createFormatError(log),
      includeStacktraceInErrorResponses: false,
      introspection: true,
      // Shutdown is ours (main.ts): Apollo must not install its own SIGTERM/SIGINT handlers.
      stopOnTerminationSignals: false,
    });
    await apollo.start();
    const server = apollo;
    const trustedProxies = parseTrustedProxies(config.trustedProxies);

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
        const raw = await readBody(req);
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
            return { principal, ip, services };
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

    httpServer = createServer((req, res) => {
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
    await new Promise<void>((resolve, reject) => {
      srv.once("error", reject);
      srv.listen(config.port, opts.host ?? "0.0.0.0", () => resolve());
    });
    // graphql-ws subscriptions on the same path (`dedicatedNodeStatus`); the token comes in connectionParams.
    const wss = new WebSocketServer({ server: srv, path: "/graphql" });
    // Errors over graphql-ws go through the same masking as Apollo's formatError (createWsErrorFormatting).
    const wsErrors = createWsErrorFormatting(log);
    const wsServer = attachGraphqlWs<Record<string, unknown>>(
      {
        schema: await buildControlPlaneSchema(),
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
    const port = (srv.address() as AddressInfo).port;
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
      close() {
        closing ??= (async () => {
          await wsServer.dispose();
          await new Promise<void>((resolve) => wss.close(() => resolve()));
          await services.nodes.close();
          await new Promise<void>((resolve) => {
            srv.close(() => resolve());
            srv.closeIdleConnections();
            setTimeout(() => srv.closeAllConnections(), 2000).unref();
          });
          log.debug("http server closed");
          await server.stop();
          log.debug("apollo stopped");
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
