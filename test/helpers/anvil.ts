import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { freePort } from "./ports";
import { type StartedProcess, startProcess } from "./process";

/**
 * Path to the anvil binary shipped by `@foundry-rs/anvil-linux-amd64`, an optional dependency that npm
 * installs on linux-x64 only; elsewhere `anvil` from Foundry on PATH.
 */
export function anvilBinary(): string {
  try {
    return require.resolve("@foundry-rs/anvil-linux-amd64/bin/anvil");
  } catch {}
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir !== "" && existsSync(join(dir, "anvil"))) return join(dir, "anvil");
  }
  throw new Error(
    "the tests need anvil: @foundry-rs/anvil-linux-amd64 (an optional dependency) installs on linux-x64 only " +
      `(this is ${process.platform}-${process.arch}) and no \`anvil\` is on PATH; install Foundry's anvil`,
  );
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
