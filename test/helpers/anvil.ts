import { freePort } from "./ports";
import { type StartedProcess, startProcess } from "./process";

/** Path to the anvil binary shipped by the npm package `@foundry-rs/anvil-linux-amd64`. */
export function anvilBinary(): string {
  return require.resolve("@foundry-rs/anvil-linux-amd64/bin/anvil");
}

export interface Anvil extends StartedProcess {
  port: number;
  httpUrl: string;
  wsUrl: string;
}

/**
 * Starts a real anvil node on a free port. `blockTimeSec` mines on an interval (else on each tx);
 * `args`: more anvil flags (e.g. `--timestamp` for a genesis two nodes share).
 */
export async function startAnvil(
  opts: { blockTimeSec?: number; chainId?: number; args?: readonly string[] } = {},
): Promise<Anvil> {
  const port = await freePort();
  const args = ["--host", "127.0.0.1", "--port", String(port), "--silent"];
  if (opts.blockTimeSec) args.push("--block-time", String(opts.blockTimeSec));
  if (opts.chainId) args.push("--chain-id", String(opts.chainId));
  if (opts.args) args.push(...opts.args);
  const httpUrl = `http://127.0.0.1:${port}`;
  const proc = await startProcess(anvilBinary(), args, {
    ready: async () => {
      const res = await fetch(httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
      });
      return res.ok;
    },
  });
  return Object.assign(proc, { port, httpUrl, wsUrl: `ws://127.0.0.1:${port}` });
}
