import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP pass-through to Redis that a test can cut (closing every connection and refusing new ones) and
 * restore on the same port: a Redis outage as the data plane would see it, without touching Redis.
 */
export class TcpProxy {
  port = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on("error", drop).on("close", drop);
      upstream.on("error", drop).on("close", drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    const addr = server.address();
    if (addr !== null && typeof addr === "object") this.port = addr.port;
    this.server = server;
  }

  /** Cuts every connection and stops listening (connects are refused until `start()` again). */
  async cut(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
}
