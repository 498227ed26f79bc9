#!/usr/bin/env node
// `npm start`: builds, then runs the whole gateway on this machine for a newcomer:
// control plane, worker and data plane as child processes, a local anvil as the demo network's
// upstream (unless DEMO_UPSTREAM_URL is set), and a demo workspace + app whose endpoint is printed.
// Ctrl-C (SIGINT) or SIGTERM stops every child it started, by PID, and waits for them.

const { spawn, spawnSync } = require("node:child_process");
const { randomBytes } = require("node:crypto");
const { existsSync } = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const children = [];
let stopping = false;

function log(msg) {
  process.stdout.write(`[start] ${msg}\n`);
}

function build() {
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

function run(name, file, args, env) {
  const child = spawn(file, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  const prefix = (line) => `${name.padEnd(13)}| ${line}\n`;
  const pipe = (stream, out) => {
    let buf = "";
    stream.on("data", (d) => {
      buf += d.toString();
      let i = buf.indexOf("\n");
      while (i >= 0) {
        out.write(prefix(buf.slice(0, i)));
        buf = buf.slice(i + 1);
        i = buf.indexOf("\n");
      }
    });
  };
  pipe(child.stdout, process.stdout);
  pipe(child.stderr, process.stderr);
  child.on("exit", (code, signal) => {
    if (!stopping) {
      log(`${name} exited (${signal ?? code}); stopping everything`);
      void shutdown(1);
    }
  });
  children.push({ name, child });
  return child;
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
  // Reverse start order: data plane drains first, anvil last.
  for (const { name, child } of [...children].reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    log(`${name} stopped`);
  }
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
  env.PUBLIC_HTTP_URL ??= `http://127.0.0.1:${env.DATA_PLANE_PORT}`;
  env.PUBLIC_WS_URL ??= `ws://127.0.0.1:${env.DATA_PLANE_PORT}`;
  const generatedAdmin = env.ADMIN_TOKEN === undefined;
  env.ADMIN_TOKEN ??= `adm_${randomBytes(24).toString("base64url")}`;

  await ensureDatabase(env.DATABASE_URL);

  let upstream = env.DEMO_UPSTREAM_URL;
  if (!upstream) {
    const anvilPort = env.DEMO_ANVIL_PORT ?? "8545";
    upstream = `http://127.0.0.1:${anvilPort}`;
    run("anvil", require.resolve("@foundry-rs/anvil-linux-amd64/bin/anvil"), [
      "--host",
      "127.0.0.1",
      "--port",
      anvilPort,
      "--block-time",
      "2",
      "--silent",
    ]);
    await waitFor("anvil", () => rpcOk(upstream));
    log(`anvil (chain 31337) on ${upstream}`);
  }

  const cpUrl = `http://127.0.0.1:${env.CONTROL_PLANE_PORT}/graphql`;
  run("control-plane", process.execPath, ["dist/control-plane/src/main.js"], env);
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
    `  Operator token: ${generatedAdmin ? `${env.ADMIN_TOKEN} (generated; set ADMIN_TOKEN to keep one)` : "(ADMIN_TOKEN from your environment)"}`,
    `  Demo account:   ${info.email} / ${info.password}`,
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
