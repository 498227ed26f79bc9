/**
 * JWT benchmark (issue 16 §3): keyed cache-miss requests per second through one gateway process for an app
 * that requires a JWT (every request carries `Authorization: Bearer <jwt>`, RS256) against an app that does
 * not, measured in the same run, alternating (BENCH_JWT_REPEATS rounds, median kept), in front of the
 * instant stub upstream. The body is an `eth_call` with params unique per request, so every request goes
 * upstream: the figure is the JWT check's cost on the forwarding path, not on a cache hit.
 *
 * A client reuses its token, so the gateway verifies it once and then serves the verdict from its cache
 * (auth/jwt.ts); the run also reports how many signature verifications the gateway made
 * (rpcgw_jwt_verifications_total), which should be one.
 *
 *   node dist/bench/jwt.js     (alone: prints the figures and writes the `jwt` section of
 *                               bench/results.json, or BENCH_RESULTS; the rest of the file is kept)
 *   import { runJwtBench } from "./jwt"   (from bench/run.ts)
 *
 * Environment: BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS,
 * BENCH_JWT_REPEATS (3), BENCH_STUB_IMPL (uws), REDIS_URL. Load by wrk when installed, else autocannon.
 */
import os from "node:os";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { generateApiKey, hashApiKey } from "../shared/src/crypto/api-key";
import { type KeyRecord, KeyRecordSchema } from "../shared/src/redis/records";
import { envInt } from "./env";
import { BENCH_NETWORK, startGateway } from "./gateway";
import { RESULTS_FILE, writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";
import { runVariantsSection, type VariantMedian } from "./variants";

export interface JwtBenchOptions {
  redisUrl?: string;
  durationS?: number;
  warmupS?: number;
  connections?: number;
  threads?: number;
  repeats?: number;
  stubImpl?: "uws" | "node";
  outDir?: string;
}

export interface JwtModeResult {
  requestsPerSec: number;
  /**
   * The gateway process's CPU time (user + system, /proc) per request, median round: less sensitive than
   * req/s to other load on a shared machine.
   */
  cpuUsPerRequest: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  socketErrors: number;
  /** Every round's req/s, worst first; the figures above are the median round's. */
  runsRequestsPerSec: number[];
}

export interface JwtBenchResult {
  tool: "wrk" | "autocannon";
  algorithm: "RS256";
  connections: number;
  durationS: number;
  repeats: number;
  jwtOff: JwtModeResult;
  jwtOn: JwtModeResult;
  /** Signature verifications the gateway made over the whole bench (the token is reused: 1). */
  verifications: number;
  ratios: { cacheMissJwtOnVsOff: number | null; cpuPerRequestJwtOnVsOff: number | null };
}

const log = (s: string) => process.stdout.write(`${s}\n`);
const CHAIN_ID_BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';

const PLAN = {
  name: "bench",
  requestsPerSecond: 1_000_000_000,
  dailyRequestLimit: 1_000_000_000_000,
  monthlyRequestLimit: null,
};

async function verifications(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^rpcgw_jwt_verifications_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

async function expect200(label: string, url: string, headers: Record<string, string> = {}): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: CHAIN_ID_BODY,
  });
  const text = await res.text();
  if (res.status !== 200 || !text.includes('"result"'))
    throw new Error(`${label}: sanity request failed: HTTP ${res.status} ${text}`);
}

function modeResult(v: VariantMedian): JwtModeResult {
  const m = v.median;
  return {
    requestsPerSec: v.requestsPerSec,
    cpuUsPerRequest: v.cpuUsPerRequest,
    p50Ms: m.p50Ms,
    p99Ms: m.p99Ms,
    requests: m.requests,
    non2xx: m.non2xx,
    socketErrors: m.socketErrors,
    runsRequestsPerSec: v.runsRequestsPerSec,
  };
}

/** Runs the bench: its own stub and gateway processes (stopped by PID), Redis records under a fresh prefix. */
export async function runJwtBench(opts: JwtBenchOptions = {}): Promise<JwtBenchResult> {
  const durationS = Math.max(1, opts.durationS ?? 10);
  const warmupS = Math.max(0, opts.warmupS ?? 2);
  const connections = Math.max(1, opts.connections ?? 64);
  const threads = Math.max(1, opts.threads ?? (os.cpus().length <= 2 ? 1 : 2));
  const repeats = Math.max(1, opts.repeats ?? 3);
  let metricsUrl = "";
  const r = await runVariantsSection({
    labels: ["jwt-off", "jwt-on"],
    load: {
      redisUrl: opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      durationS,
      warmupS,
      connections,
      threads,
      repeats,
      stubImpl: opts.stubImpl,
      outDir: opts.outDir,
    },
    log,
    setup: async ({ redis, stub, tool, defer }) => {
      // Two apps of one workspace on the same plan: one requires a JWT, the other does not.
      const { publicKey, privateKey } = await generateKeyPair("RS256");
      const jwk = (await exportJWK(publicKey)) as Record<string, string>;
      const record = (appId: string, jwt: boolean): KeyRecord =>
        KeyRecordSchema.parse({
          kind: "app",
          workspaceId: "ws-bench",
          appId,
          nodeId: null,
          plan: PLAN,
          allowlist: { origins: [], ips: [] },
          expiresAtMs: null,
          rpcMethods: null,
          access: jwt
            ? {
                methodMode: "DENY",
                methods: [],
                requestsPerSecond: null,
                requestsPerDay: null,
                userAgents: [],
                jwt: {
                  keys: [{ kid: "bench", alg: "RS256", jwk }],
                  audience: "https://rpc.bench",
                  subject: null,
                },
              }
            : null,
        });
      const plainKey = generateApiKey();
      const jwtKey = generateApiKey();
      await redis.redis.set(
        redis.names.apiKey(hashApiKey(plainKey)),
        JSON.stringify(record("app-plain", false)),
      );
      await redis.redis.set(redis.names.apiKey(hashApiKey(jwtKey)), JSON.stringify(record("app-jwt", true)));
      const token = await new SignJWT({ aud: "https://rpc.bench", sub: "bench-client" })
        .setProtectedHeader({ alg: "RS256", kid: "bench" })
        .setExpirationTime("2h")
        .sign(privateKey);
      const headers = { authorization: `Bearer ${token}` };

      const gw = await startGateway({ redisUrl: redis.url, prefix: redis.prefix });
      defer(() => gw.proc.stop());
      metricsUrl = gw.metricsUrl;
      const offUrl = `${gw.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(plainKey)}`;
      const onUrl = `${gw.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(jwtKey)}`;
      await expect200("jwt off", offUrl);
      await expect200("jwt on", onUrl, headers);
      const refused = await fetch(onUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: CHAIN_ID_BODY,
      });
      if (refused.status !== 401)
        throw new Error(`jwt on: a request without the token got HTTP ${refused.status}`);
      log(
        `gateway pid ${gw.proc.pid}, stub pid ${stub.pid}; ${repeats} rounds of ${durationS}s (+${warmupS}s warm-up), ${connections} connections, ${tool}`,
      );
      return {
        "jwt-off": { url: offUrl, pid: gw.proc.pid },
        "jwt-on": { url: onUrl, headers, pid: gw.proc.pid },
      };
    },
    // The order flipped every round, so drift on a shared machine hits both alike.
    order: (round) => (round % 2 === 0 ? ["jwt-off", "jwt-on"] : ["jwt-on", "jwt-off"]),
    afterRun: (_, run) => `  gateway CPU ${run.cpuUsPerRequest.toFixed(1)} µs/request`,
    afterRounds: () => verifications(metricsUrl),
    labelWidth: 10,
    flagFailures: true,
    cpuDigits: 2,
    ratios: {
      cacheMissJwtOnVsOff: { of: "jwt-on", over: "jwt-off", by: "requestsPerSec" },
      cpuPerRequestJwtOnVsOff: { of: "jwt-on", over: "jwt-off", by: "cpuUsPerRequest" },
    },
  });
  const verified = r.afterRounds ?? 0;
  const jwtOff = modeResult(r.variants["jwt-off"]);
  const jwtOn = modeResult(r.variants["jwt-on"]);
  const result: JwtBenchResult = {
    tool: r.tool,
    algorithm: "RS256",
    connections,
    durationS,
    repeats,
    jwtOff,
    jwtOn,
    verifications: verified,
    ratios: r.ratios,
  };
  log(
    `  median: JWT off ${jwtOff.requestsPerSec.toLocaleString("en-US")} req/s (${jwtOff.cpuUsPerRequest} µs CPU/request), JWT on ${jwtOn.requestsPerSec.toLocaleString("en-US")} req/s (${jwtOn.cpuUsPerRequest} µs); on/off req/s ${result.ratios.cacheMissJwtOnVsOff}, CPU/request ${result.ratios.cpuPerRequestJwtOnVsOff}; signature verifications by the gateway: ${verified}`,
  );
  return result;
}

/** Standalone: runs, prints, and writes the `jwt` section into the results file (the rest kept). */
async function main(): Promise<void> {
  log("JWT bench (keyed cache miss, JWT required vs not):");
  const result = await runJwtBench({
    durationS: envInt("BENCH_DURATION_S", 10),
    warmupS: envInt("BENCH_WARMUP_S", 2),
    connections: envInt("BENCH_CONNECTIONS", 64),
    threads: process.env.BENCH_THREADS ? envInt("BENCH_THREADS", 1) : undefined,
    repeats: envInt("BENCH_JWT_REPEATS", 3),
    stubImpl: (process.env.BENCH_STUB_IMPL ?? "uws") as "uws" | "node",
  });
  writeResultsSection("jwt", { date: new Date().toISOString(), ...result }, RESULTS_FILE, {
    jwtOnVsOffCacheMissReqPerSec: result.ratios.cacheMissJwtOnVsOff,
    jwtOnVsOffCpuPerRequest: result.ratios.cpuPerRequestJwtOnVsOff,
  });
  log(`\nwrote the jwt section of ${RESULTS_FILE}`);
}

if (require.main === module) runStandalone("jwt", main);
