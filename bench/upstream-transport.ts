/**
 * Upstream transports compared: the data plane's keep-alive HTTP pool (`Upstream.exchange`, undici
 * dispatch, one call per exchange and coalesced batches) against JSON-RPC over a few multiplexed
 * WebSockets with rewritten ids (`UpstreamWsClient.call`), both against the bench's stub upstream in its
 * own process. Reports calls/s and this process's CPU per call (user + system, process.cpuUsage): the
 * gateway-side cost of each transport. Every reply is parsed as JSON (`JSON.parse` of the HTTP text; the
 * WS client parses each frame). Not included: the data plane's own reply handling (its single-call HTTP
 * path slices the reply instead of parsing it; forwarding a WS result would re-serialize it) and, for
 * the batch rows, the coalescer that builds batches from concurrent calls and splits the answers.
 *
 *   node dist/bench/upstream-transport.js      (BENCH_DURATION_S=5, BENCH_CONNECTIONS=64)
 */

import { join } from "node:path";
import { ExchangeKind, Upstream } from "../data-plane/src/upstream/upstream";
import { UpstreamWsClient } from "../data-plane/src/upstream/ws-client";
import { freePort } from "../test/helpers/ports";
import { startProcess } from "../test/helpers/process";

const durationS = Number(process.env.BENCH_DURATION_S ?? 5);
const concurrency = Number(process.env.BENCH_CONNECTIONS ?? 64);

interface Row {
  transport: string;
  callsPerSec: number;
  cpuUsPerCall: number;
}

const callBody = (id: number) =>
  `{"jsonrpc":"2.0","id":${id},"method":"eth_call","params":[{"to":"0x00000000000000000000000000000000000000b1","data":"0x${id.toString(16)}"},"latest"]}`;

/** Runs `concurrency` loops of `one` for `durationS` (after a 1 s warm-up); `one` returns calls done. */
async function drive(transport: string, one: (seq: number) => Promise<number>): Promise<Row> {
  const run = async (seconds: number) => {
    const until = Date.now() + seconds * 1000;
    let calls = 0;
    let seq = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (Date.now() < until) {
          const done = await one(seq++); // not `calls += await ...`: that reads `calls` before the await
          calls += done;
        }
      }),
    );
    return calls;
  };
  await run(1);
  const cpu = process.cpuUsage();
  const started = performance.now();
  const calls = await run(durationS);
  const elapsedS = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return {
    transport,
    callsPerSec: Math.round(calls / elapsedS),
    cpuUsPerCall: Number(((used.user + used.system) / Math.max(1, calls)).toFixed(1)),
  };
}

async function main(): Promise<void> {
  const port = await freePort();
  const stub = await startProcess(
    process.execPath,
    [join(__dirname, "stub-upstream.js"), "--port", String(port), "--impl", "uws"],
    { readyLine: /listening on \d+/ },
  );
  const rows: Row[] = [];
  try {
    const http = new Upstream(
      { id: "stub", httpUrl: `http://127.0.0.1:${port}`, wsUrl: null, weight: 1 },
      { timeoutMs: 10_000, connections: concurrency, breakerThreshold: 1_000_000, breakerCooldownMs: 1_000 },
    );
    rows.push(
      await drive("HTTP keep-alive, 1 call per exchange", async (seq) => {
        const r = await http.exchange(callBody(seq), ExchangeKind.Light, (reply) => JSON.parse(reply.text));
        if (!r.ok) throw new Error(`http exchange failed: ${r.failure}`);
        return 1;
      }),
    );
    for (const k of [8, 20]) {
      rows.push(
        await drive(`HTTP keep-alive, batches of ${k}`, async (seq) => {
          const body = `[${Array.from({ length: k }, (_, i) => callBody(seq * k + i)).join(",")}]`;
          const r = await http.exchange(body, ExchangeKind.Light, (reply) => JSON.parse(reply.text));
          if (!r.ok) throw new Error(`http exchange failed: ${r.failure}`);
          return k;
        }),
      );
    }
    await http.close();

    for (const sockets of [1, 2]) {
      const clients = Array.from(
        { length: sockets },
        (_, i) =>
          new UpstreamWsClient(`stub-${i}`, `ws://127.0.0.1:${port}/`, {
            timeoutMs: 10_000,
            pingIntervalMs: 60_000,
          }),
      );
      for (const c of clients) if (!(await c.open())) throw new Error("ws: could not connect to the stub");
      const params = [{ to: "0x00000000000000000000000000000000000000b1", data: "0x01" }, "latest"];
      rows.push(
        await drive(`WebSocket, ${sockets} multiplexed socket${sockets > 1 ? "s" : ""}`, async (seq) => {
          const r = await clients[seq % sockets]!.call("eth_call", params);
          if (!r.ok) throw new Error("ws call failed");
          return 1;
        }),
      );
      for (const c of clients) c.close();
    }
  } finally {
    await stub.stop();
  }
  process.stdout.write(
    `upstream transports (${concurrency} concurrent callers, ${durationS} s, client CPU per call):\n`,
  );
  for (const r of rows) {
    process.stdout.write(
      `  ${r.transport.padEnd(40)} ${r.callsPerSec.toLocaleString("en-US").padStart(9)} calls/s  ${String(r.cpuUsPerCall).padStart(6)} µs CPU/call\n`,
    );
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
