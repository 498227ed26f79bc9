#!/usr/bin/env node
// `npm start`: builds, then runs the whole gateway on this machine for a newcomer:
// control plane, worker and data plane as child processes, a local anvil as the demo network's
// upstream (unless DEMO_UPSTREAM_URL is set), and a demo workspace + app whose endpoint is printed.
// Ctrl-C (SIGINT) or SIGTERM stops every child it started, by PID, and waits for them.
// A child that dies on its own is restarted with exponential backoff (START_RESTART_BASE_MS, doubling
// per consecutive crash up to START_RESTART_MAX_MS; a child that ran START_RESTART_RESET_MS counts as
// healthy again), saying so on stderr. Production deployments rely on their supervisor instead
// (compose `restart:`, Kubernetes).

const { spawnSync } = require("node:child_process");
const { randomBytes } = require("node:crypto");
const { existsSync } = require("node:fs");
const path = require("node:path");
const { buildNative } = require("./build-native");
const { createSupervisor, msEnv, stopTimeoutMs } = require("./supervise");

const root = path.resolve(__dirname, "..");
let stopping = false;

function log(msg) {
  process.stdout.write(`[start] ${msg}\n`);
}

function warn(msg) {
  process.stderr.write(`[start] ${msg}\n`);
}

function build() {
  // The C batch scan first, as `npm run build` and the image do: the data plane then runs what production runs.
  log("building the C batch scan (node-gyp)…");
  const native = buildNative();
  if (native.built) log("C batch scan built: the data plane uses it");
  else warn(`note: ${native.reason}`);
  log("building (tsc)…");
  const tsc = path.join(root, "node_modules", ".bin", "tsc");
  const r = spawnSync(tsc, ["-p", "tsconfig.json"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) throw new Error("build failed");
  log("building the console (vite)…");
  const vite = path.join(root, "node_modules", ".bin", "vite");
  const v = spawnSync(vite, ["build", "--config", "control-plane/console/vite.config.mts"], {
    cwd: root,
    stdio: "inherit",
  });
  if (v.status !== 0) throw new Error("console build failed");
}

/**
 * The demo's anvil: @foundry-rs/anvil-linux-amd64 is an optional dependency (npm installs it on linux-x64
 * only), else `anvil` from Foundry on PATH. Neither: say what to do instead of a resolver stack trace.
 */
function anvilBinary() {
  try {
    return require.resolve("@foundry-rs/anvil-linux-amd64/bin/anvil");
  } catch {}
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir !== "" && existsSync(path.join(dir, "anvil"))) return path.join(dir, "anvil");
  }
  throw new Error(
    "the demo network needs anvil, and there is none: @foundry-rs/anvil-linux-amd64 (an optional dependency) " +
      `installs on linux-x64 only (this is ${process.platform}-${process.arch}) and no \`anvil\` is on PATH. ` +
      "Install Foundry's anvil, or set DEMO_UPSTREAM_URL to an EVM node's JSON-RPC URL.",
  );
}

async function ensureDatabase(url) {
  const { Client } = require("pg");
  const target = new URL(url);
  const dbName = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const c = new Client({ connectionString: admin.toString() });
  await c.connect();
  try {
    const exists = await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [dbName]);
    if (exists.rowCount === 0) {
      await c.query(`CREATE DATABASE "${dbName.replaceAll('"', '""')}"`);
      log(`created database ${dbName}`);
    }
  } finally {
    await c.end();
  }
}

const supervisor = createSupervisor({
  cwd: root,
  log,
  warn,
  restartBaseMs: msEnv("START_RESTART_BASE_MS", 1000),
  restartMaxMs: msEnv("START_RESTART_MAX_MS", 30_000),
  restartResetMs: msEnv("START_RESTART_RESET_MS", 60_000),
  stopTimeoutMs: stopTimeoutMs(),
});
const run = supervisor.run;

/** Where a client on this machine reaches a listener bound to `host` (every interface: loopback). */
function reachable(host) {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

async function waitFor(name, check, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${name} did not become ready within ${timeoutMs} ms`);
}

async function rpcOk(url) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
  });
  return res.ok;
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  log("stopping…");
  await supervisor.stop();
  process.exit(code);
}

async function main() {
  process.on("SIGINT", () => void shutdown(0));
  process.on("SIGTERM", () => void shutdown(0));

  if (process.env.SKIP_BUILD !== "1") build();

  const env = { ...process.env };
  env.DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/rpc_gateway";
  env.REDIS_URL ??= "redis://127.0.0.1:6379";
  env.CONTROL_PLANE_PORT ??= "4000";
  env.DATA_PLANE_PORT ??= "8080";
  // A development stack: every listener on loopback unless told otherwise (the processes' own defaults,
  // every interface, are for containers). The metrics listener and anvil are loopback already.
  env.CONTROL_PLANE_HOST ??= "127.0.0.1";
  env.DATA_PLANE_HOST ??= "127.0.0.1";
  const dpHost = reachable(env.DATA_PLANE_HOST);
  env.PUBLIC_HTTP_URL ??= `http://${dpHost}:${env.DATA_PLANE_PORT}`;
  env.PUBLIC_WS_URL ??= `ws://${dpHost}:${env.DATA_PLANE_PORT}`;
  const generatedAdmin = env.ADMIN_TOKEN === undefined;
  // The operator token goes to the control plane only (as in docker/compose.yml), never to the worker,
  // the data plane or anvil.
  const adminToken = env.ADMIN_TOKEN ?? `adm_${randomBytes(24).toString("base64url")}`;
  delete env.ADMIN_TOKEN;
  const cpEnv = { ...env, ADMIN_TOKEN: adminToken };

  await ensureDatabase(env.DATABASE_URL);

  let upstream = env.DEMO_UPSTREAM_URL;
  if (!upstream) {
    const anvilPort = env.DEMO_ANVIL_PORT ?? "8545";
    upstream = `http://127.0.0.1:${anvilPort}`;
    run(
      "anvil",
      anvilBinary(),
      ["--host", "127.0.0.1", "--port", anvilPort, "--block-time", "2", "--silent"],
      env,
    );
    await waitFor("anvil", () => rpcOk(upstream));
    log(`anvil (chain 31337) on ${upstream}`);
  }

  const cpUrl = `http://${reachable(env.CONTROL_PLANE_HOST)}:${env.CONTROL_PLANE_PORT}/graphql`;
  run("control-plane", process.execPath, ["dist/control-plane/src/main.js"], cpEnv);
  await waitFor("control plane", async () => {
    const res = await fetch(cpUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    return res.ok;
  });
  run("worker", process.execPath, ["dist/control-plane/src/worker/main.js"], env);

  const dataPlaneEntry = "dist/data-plane/src/main.js";
  const hasDataPlane = existsSync(path.join(root, dataPlaneEntry));
  if (hasDataPlane) {
    run("data-plane", process.execPath, [dataPlaneEntry], env);
    await waitFor("data plane", async () => (await fetch(`${env.PUBLIC_HTTP_URL}/readyz`)).ok);
  }

  const demo = spawnSync(
    process.execPath,
    ["dist/control-plane/src/cli/bootstrap-demo.js", "--upstream", upstream],
    { cwd: root, env, encoding: "utf8" },
  );
  if (demo.status !== 0) throw new Error(`demo bootstrap failed:\n${demo.stderr}`);
  const info = JSON.parse(demo.stdout);

  const lines = [
    "",
    "RPC gateway is running.",
    `  GraphQL:        ${cpUrl}`,
    `  Console:        ${cpUrl.replace(/\/graphql$/, "/console/")} (log in with the demo account)`,
    `  Metrics:        ${env.METRICS_PORT === "0" ? "(a free port: see the data plane's log)" : `http://${reachable(env.METRICS_HOST ?? "127.0.0.1")}:${env.METRICS_PORT ?? "9464"}/metrics (not on the RPC port)`}`,
    `  Operator token: ${generatedAdmin ? `${adminToken} (generated; set ADMIN_TOKEN to keep one)` : "(ADMIN_TOKEN from your environment)"}`,
    "                  the platform operator: GraphQL with `Authorization: Bearer <operator token>`;",
    "                  setOperator(account:, operator: true) with it opens an account's Operator pages",
    info.password === null
      ? `  Demo account:   ${info.email} (password shown when it was created; not stored in the clear)`
      : `  Demo account:   ${info.email} / ${info.password} (random, shown once: note it)`,
    `  Demo token:     ${info.token}`,
    `  Demo app:       ${info.appName ?? "demo"} (${info.appId})`,
    `  API key:        ${info.apiKey}`,
  ];
  for (const ep of info.endpoints) {
    lines.push(`  ${ep.network} HTTPS: ${ep.httpsUrl}`, `  ${ep.network} WSS:   ${ep.wssUrl}`, `  try it:`);
    lines.push(`    ${ep.exampleCommand}`);
  }
  if (!hasDataPlane) lines.push("  (data plane not built yet: endpoints will answer once it exists)");
  lines.push("", "Ctrl-C stops everything.", "");
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((err) => {
  process.stderr.write(`[start] ${err.stack ?? err}\n`);
  void shutdown(1);
});
