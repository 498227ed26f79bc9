import { connect, createServer } from "node:net";

/**
 * Ports handed out come from below Linux's ephemeral range (32768-60999 by default): the kernel picks
 * ephemeral ports for every outgoing connection (Redis, Postgres, anvil, Chromium) and for every `listen(0)`,
 * so a port taken from that range could be taken by one of those between `freePort()` and the caller's own
 * `listen`. A port from this range can only be taken by an explicit bind.
 */
const LOWEST_PORT = 20_000;
const HIGHEST_PORT = 32_767;
const ATTEMPTS = 200;

/** Never hand the same port out twice in one process: a caller may not have bound it yet. */
const handedOut = new Set<number>();

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen({ port, host: "127.0.0.1", exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range (see above). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < ATTEMPTS; i++) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (HIGHEST_PORT - LOWEST_PORT + 1));
    if (handedOut.has(port)) continue;
    if (await canListen(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${LOWEST_PORT}-${HIGHEST_PORT} after ${ATTEMPTS} attempts`);
}

/**
 * Whether a TCP connection to host:port is accepted (refused or timed out: false). To tell a listener bound
 * to 127.0.0.1 from one bound to every interface without leaving the machine, ask on 127.0.0.2: it is
 * loopback too (all of 127.0.0.0/8 is), so a 0.0.0.0 listener accepts it and a 127.0.0.1 one refuses it.
 */
export function acceptsConnection(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}
