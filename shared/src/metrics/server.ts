import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../log/logger";

/** A scrape must arrive whole within this (a scraper sends one short GET). */
const HEADERS_TIMEOUT_MS = 5_000;

export interface MetricsListener {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * `GET /metrics` (Prometheus text) on its own listener, never on a public port: the series name every
 * network, upstream, dedicated node and GraphQL operation, which tenants must not read. Each process entry
 * owns one: the data plane's on METRICS_HOST:METRICS_PORT (main.ts for one thread, the threads' main thread
 * for several, which renders every thread's series aggregated), the control plane's on
 * CONTROL_PLANE_METRICS_HOST:CONTROL_PLANE_METRICS_PORT, the worker's on WORKER_METRICS_HOST:WORKER_METRICS_PORT.
 * Anything else on the port is 404, a method other than GET/HEAD 405.
 */
export function serveMetrics(opts: {
  host: string;
  /** 0 = a free port (tests). */
  port: number;
  contentType: string;
  /** undefined: no metrics in this process (NoopMetrics): 404. */
  render: () => Promise<string | undefined>;
  logger: Logger;
}): Promise<MetricsListener> {
  const srv = createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { "content-type": "text/plain", allow: "GET, HEAD" }).end("method not allowed\n");
      return;
    }
    opts.render().then(
      (text) => {
        res.writeHead(text === undefined ? 404 : 200, { "content-type": opts.contentType });
        res.end(req.method === "HEAD" ? undefined : (text ?? ""));
      },
      (err: unknown) => {
        opts.logger.error({ err }, "could not render /metrics");
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end("metrics unavailable\n");
      },
    );
  });
  srv.headersTimeout = HEADERS_TIMEOUT_MS;
  srv.requestTimeout = HEADERS_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(opts.port, opts.host, () => {
      srv.off("error", reject);
      srv.on("error", (err) => opts.logger.error({ err }, "metrics listener error"));
      const { address, port } = srv.address() as AddressInfo;
      opts.logger.info({ host: address, port }, "metrics listening");
      resolve({
        host: address,
        port,
        close: () =>
          new Promise<void>((done) => {
            srv.close(() => done());
            srv.closeAllConnections();
          }),
      });
    });
  });
}
