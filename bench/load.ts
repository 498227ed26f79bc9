import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Pool } from "undici";

/** Load generators for the benchmark: wrk (preferred), autocannon (fallback), and a fixed-rate client. */

export interface LoadResult {
  tool: "wrk" | "autocannon";
  requestsPerSec: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  requests: number;
  /** Responses with a status outside 2xx/3xx. */
  non2xx: number;
  /** Connect/read/write errors and timeouts. */
  socketErrors: number;
}

/** What to send: a fixed body, or one that varies per request (unique eth_call params: never a cache hit). */
export type Body = { kind: "static"; body: string } | { kind: "unique-eth-call" };

export function which(cmd: string): string | null {
  try {
    return execFileSync("which", [cmd], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
}

function uniqueEthCall(nonce: string, tid: number, counter: number): string {
  const data = `0x${nonce}${tid.toString(16).padStart(4, "0")}${counter.toString(16).padStart(16, "0")}`;
  return `{"jsonrpc":"2.0","id":${counter},"method":"eth_call","params":[{"to":"0x00000000000000000000000000000000000000b1","data":"${data}"},"latest"]}`;
}

/**
 * Lua for wrk: POST with JSON; for unique bodies every request carries a fresh (nonce, thread, counter).
 * With `paced`, each connection waits `args[2]` ms (fractional, randomly rounded) after a response before
 * its next request: a steady request rate, as close to wrk2 as plain wrk gets.
 */
function wrkScript(body: Body, paced = false, headers: Record<string, string> = {}): string {
  let head = 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n';
  for (const [name, value] of Object.entries(headers))
    head += `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}\n`;
  const init = `
function init(args)
  nonce = args[1] or "00000000"
  pace = tonumber(args[2] or "0")
  counter = 0
end
`;
  const delay = paced
    ? `
function delay()
  local base = math.floor(pace)
  if math.random() < pace - base then return base + 1 end
  return base
end
`
    : "";
  if (body.kind === "static") return `${head}wrk.body = ${JSON.stringify(body.body)}\n${init}${delay}`;
  return `${head}
local nthreads = 0
function setup(thread)
  thread:set("tid", nthreads)
  nthreads = nthreads + 1
end
${init}${delay}
function request()
  counter = counter + 1
  local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"eth_call","params":[{"to":"0x00000000000000000000000000000000000000b1","data":"0x%s%04x%016x"},"latest"]}', counter, nonce, tid, counter)
  return wrk.format(nil, nil, nil, body)
end
`;
}

function toMs(value: string, unit: string): number {
  const v = Number.parseFloat(value);
  switch (unit) {
    case "us":
      return v / 1000;
    case "ms":
      return v;
    case "s":
      return v * 1000;
    case "m":
      return v * 60_000;
    default:
      return Number.NaN;
  }
}

export function parseWrk(out: string): Omit<LoadResult, "tool"> {
  const pct = (p: string) => {
    const m = new RegExp(`^\\s*${p}%\\s+([0-9.]+)(us|ms|s|m)\\s*$`, "m").exec(out);
    return m ? toMs(m[1]!, m[2]!) : Number.NaN;
  };
  const rps = /Requests\/sec:\s+([0-9.]+)/.exec(out);
  const total = /([0-9]+) requests in/.exec(out);
  const non2xx = /Non-2xx or 3xx responses:\s+([0-9]+)/.exec(out);
  const sock = /Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)/.exec(out);
  return {
    requestsPerSec: rps ? Number.parseFloat(rps[1]!) : Number.NaN,
    p50Ms: pct("50"),
    p90Ms: pct("90"),
    p99Ms: pct("99"),
    requests: total ? Number.parseInt(total[1]!, 10) : 0,
    non2xx: non2xx ? Number.parseInt(non2xx[1]!, 10) : 0,
    socketErrors: sock ? sock.slice(1, 5).reduce((a, b) => a + Number.parseInt(b, 10), 0) : 0,
  };
}

export interface LoadOptions {
  url: string;
  body: Body;
  durationS: number;
  connections: number;
  threads: number;
  /** Where to keep the wrk script and raw output. */
  outDir: string;
  label: string;
  /** Extra request headers (e.g. `authorization` for an app that requires a JWT). */
  headers?: Record<string, string>;
  /** CPUs to pin wrk to (`taskset -c`), e.g. "0"; unset = wherever the scheduler puts it. */
  cpus?: string;
}

export async function runWrk(o: LoadOptions & { paceMs?: number }): Promise<LoadResult> {
  const script = join(o.outDir, `${o.label}.lua`);
  writeFileSync(script, wrkScript(o.body, o.paceMs !== undefined, o.headers));
  const nonce = Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, "0");
  const out = await new Promise<string>((resolve, reject) => {
    const wrkArgs = [
      `-t${o.threads}`,
      `-c${o.connections}`,
      `-d${o.durationS}s`,
      "--timeout",
      "10s",
      "--latency",
      "-s",
      script,
      o.url,
      "--",
      nonce,
      String(o.paceMs ?? 0),
    ];
    const child =
      o.cpus === undefined
        ? spawn("wrk", wrkArgs, { stdio: ["ignore", "pipe", "pipe"] })
        : spawn("taskset", ["-c", o.cpus, "wrk", ...wrkArgs], { stdio: ["ignore", "pipe", "pipe"] });
    let text = "";
    child.stdout.on("data", (d: Buffer) => {
      text += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      text += d.toString();
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}:\n${text}`)),
    );
  });
  writeFileSync(join(o.outDir, `${o.label}.wrk.txt`), out);
  return { tool: "wrk", ...parseWrk(out) };
}

export async function runAutocannon(o: LoadOptions): Promise<LoadResult> {
  // autocannon ships no type declarations; this is the slice of its result the bench reads.
  const autocannon = require("autocannon") as (opts: Record<string, unknown>) => Promise<AutocannonResult>;
  const nonce = Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, "0");
  let counter = 0;
  const result = await autocannon({
    url: o.url,
    method: "POST",
    headers: { "content-type": "application/json", ...o.headers },
    connections: o.connections,
    duration: o.durationS,
    timeout: 10,
    ...(o.body.kind === "static"
      ? { body: o.body.body }
      : {
          requests: [
            {
              setupRequest: (req: Record<string, unknown>) => ({
                ...req,
                body: uniqueEthCall(nonce, 0, ++counter),
              }),
            },
          ],
        }),
  });
  writeFileSync(join(o.outDir, `${o.label}.autocannon.json`), JSON.stringify(result, null, 2));
  return {
    tool: "autocannon",
    requestsPerSec: result.requests.average,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    socketErrors: result.errors + result.timeouts,
  };
}

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p90: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}

export function runLoad(o: LoadOptions, tool: "wrk" | "autocannon"): Promise<LoadResult> {
  return tool === "wrk" ? runWrk(o) : runAutocannon(o);
}

/**
 * A steady rate with wrk: every connection pauses between requests. The pause is calibrated on the warm-up
 * run (pause = period - observed latency), so the rate lands near `rate`; the achieved rate is reported.
 */
export async function runWrkAtRate(
  o: LoadOptions & { rate: number; warmupS: number },
): Promise<LoadResult & { targetRate: number; paceMs: number }> {
  const period = (o.connections * 1000) / o.rate;
  let pace = period;
  if (o.warmupS > 0) {
    const w = await runWrk({ ...o, durationS: o.warmupS, label: `${o.label}.warmup`, paceMs: pace });
    if (w.requestsPerSec > 0) {
      const observedLatency = (o.connections * 1000) / w.requestsPerSec - pace;
      pace = Math.max(0, period - Math.max(0, observedLatency));
    }
  }
  const r = await runWrk({ ...o, paceMs: pace });
  return { ...r, targetRate: o.rate, paceMs: pace };
}

export interface FixedRateResult {
  targetRate: number;
  achievedRate: number;
  sent: number;
  ok: number;
  failed: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/**
 * Open-loop load at a fixed request rate (what wrk2 does; wrk2 is not packaged in Debian). Requests are
 * scheduled on a timeline; latency is measured from the scheduled time (so queueing in the target counts,
 * no coordinated omission), in microseconds, over keep-alive connections.
 */
export async function runFixedRate(o: {
  url: string;
  body: Body;
  rate: number;
  durationS: number;
  connections: number;
}): Promise<FixedRateResult> {
  const u = new URL(o.url);
  const path = `${u.pathname}${u.search}`;
  const pool = new Pool(u.origin, { connections: o.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const nonce = Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(8, "0");
  const total = Math.floor(o.rate * o.durationS);
  const lat = new Float64Array(total);
  let ok = 0;
  let failed = 0;
  let sent = 0;
  let done = 0;
  const intervalNs = 1e9 / o.rate;
  const start = process.hrtime.bigint();
  const headers = { "content-type": "application/json" };
  await new Promise<void>((resolve) => {
    const fire = (i: number) => {
      const scheduled = start + BigInt(Math.round(i * intervalNs));
      const body = o.body.kind === "static" ? o.body.body : uniqueEthCall(nonce, 1, i);
      pool
        .request({ path, method: "POST", headers, body })
        .then(async (res) => {
          await res.body.text();
          if (res.statusCode >= 200 && res.statusCode < 300) {
            lat[ok++] = Number(process.hrtime.bigint() - scheduled) / 1e6;
          } else failed++;
        })
        .catch(() => {
          failed++;
        })
        .finally(() => {
          done++;
          if (done === total) resolve();
        });
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(Number(process.hrtime.bigint() - start) / intervalNs) + 1);
      while (sent < due) fire(sent++);
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  await pool.close();
  const sorted = lat.slice(0, ok).sort();
  return {
    targetRate: o.rate,
    achievedRate: sent / elapsedS,
    sent,
    ok,
    failed,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
    p999Ms: percentile(sorted, 99.9),
  };
}
