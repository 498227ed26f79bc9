import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { load } from "js-yaml";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { shutdownBudgetMs } from "../../../data-plane/src/data-plane";

const root = path.resolve(__dirname, "../../../..");
const composeFile = path.join(root, "docker/compose.yml");

/** `docker compose` (v2 plugin) when present, else `docker-compose` (v1, Debian's package). */
function composeCommand(): string[] | null {
  if (spawnSync("docker", ["compose", "version"]).status === 0) return ["docker", "compose"];
  if (spawnSync("docker-compose", ["version"]).status === 0) return ["docker-compose"];
  return null;
}

function composeConfig(env: NodeJS.ProcessEnv) {
  const cmd = composeCommand();
  assert.ok(cmd, "no compose CLI: install one (`apt-get install docker-compose`); .ci/run does");
  const [bin, ...pre] = cmd;
  return spawnSync(bin, [...pre, "-f", composeFile, "config"], {
    env: { PATH: process.env.PATH, ...env },
    encoding: "utf8",
  });
}

describe("docker/compose.yml", () => {
  it("serves the data plane's /metrics on METRICS_PORT, published on the host's loopback only, never on 8080", () => {
    // The file itself (no compose CLI needed): the data plane's environment and port mappings.
    // biome-ignore lint/suspicious/noExplicitAny: parsed YAML
    const dp = (load(readFileSync(composeFile, "utf8")) as any).services["data-plane"];
    const config = loadDataPlaneConfig(dp.environment);
    assert.notEqual(config.METRICS_PORT, config.DATA_PLANE_PORT);
    // Inside the container it must listen beyond loopback, or the mapping below reaches nothing.
    assert.equal(config.METRICS_HOST, "0.0.0.0");
    const ports: string[] = dp.ports;
    const mapped = ports.filter((p) => p.endsWith(`:${config.METRICS_PORT}`));
    assert.deepEqual(
      mapped,
      [`127.0.0.1:${config.METRICS_PORT}:${config.METRICS_PORT}`],
      "metrics published beyond the host's loopback",
    );
  });

  it("validates with the operator secrets set, and names every process", () => {
    const r = composeConfig({ ADMIN_TOKEN: "t", KEY_ENCRYPTION_SECRET: "s" });
    assert.equal(r.status, 0, r.stderr);
    for (const svc of ["postgres:", "redis:", "control-plane:", "worker:", "data-plane:"]) {
      assert.match(r.stdout, new RegExp(`^  ${svc}`, "m"), `service ${svc} missing`);
    }
  });

  it("persists Redis (AOF every second on a named volume) and restarts every service", () => {
    const r = composeConfig({ ADMIN_TOKEN: "t", KEY_ENCRYPTION_SECRET: "s" });
    assert.equal(r.status, 0, r.stderr);
    // Services are the two-space-indented blocks under `services:` (v1 and v2 both render them so).
    const services = r.stdout.slice(r.stdout.search(/^services:\n/m));
    const blocks = new Map<string, string>();
    for (const m of services.matchAll(/^ {2}([a-z-]+):\n((?: {4}.*\n| *\n)*)/gm)) blocks.set(m[1]!, m[2]!);
    const redis = blocks.get("redis");
    assert.ok(redis, "no redis service");
    const args = redis.replace(/\s+-\s+/g, " ").replace(/["']/g, "");
    assert.match(args, /--appendonly yes/, "Redis must run with AOF");
    assert.match(args, /--appendfsync everysec/);
    assert.match(redis, /redisdata:\/data/, "Redis data must live on the named volume");
    assert.match(r.stdout, /^volumes:\n(?: {2}.*\n)*? {2}redisdata:/m, "volume redisdata not declared");
    for (const svc of ["postgres", "redis", "control-plane", "worker", "data-plane"]) {
      assert.match(blocks.get(svc) ?? "", /restart: unless-stopped/, `${svc} without restart policy`);
    }
  });

  it("gives ADMIN_TOKEN to the control plane only, KEY_ENCRYPTION_SECRET to it and the worker, NODE_ENV=production everywhere", () => {
    const admin = "admin-token-for-the-compose-test-0123456789";
    const secret = "key-secret-for-the-compose-test-0123456789";
    const r = composeConfig({ ADMIN_TOKEN: admin, KEY_ENCRYPTION_SECRET: secret });
    assert.equal(r.status, 0, r.stderr);
    const services = r.stdout.slice(r.stdout.search(/^services:\n/m));
    const blocks = new Map<string, string>();
    for (const m of services.matchAll(/^ {2}([a-z-]+):\n((?: {4}.*\n| *\n)*)/gm)) blocks.set(m[1]!, m[2]!);
    assert.ok(blocks.get("control-plane")?.includes(admin), "control plane without ADMIN_TOKEN");
    assert.ok(blocks.get("control-plane")?.includes(secret), "control plane without KEY_ENCRYPTION_SECRET");
    const worker = blocks.get("worker") ?? "";
    assert.ok(worker.includes(secret), "worker without KEY_ENCRYPTION_SECRET (it signs webhooks)");
    assert.ok(!worker.includes(admin), "worker is given ADMIN_TOKEN, which it does not use");
    const dataPlane = blocks.get("data-plane") ?? "";
    assert.ok(dataPlane.length > 0, "no data-plane service");
    assert.ok(
      !dataPlane.includes(admin) && !dataPlane.includes(secret),
      "data-plane is given a secret it does not use",
    );
    for (const svc of ["control-plane", "worker", "data-plane"]) {
      assert.match(blocks.get(svc) ?? "", /NODE_ENV: production/, `${svc} not in production mode`);
    }
  });

  it("gives the gateway's processes time to finish shutting down before Docker kills them", () => {
    const r = composeConfig({ ADMIN_TOKEN: "t", KEY_ENCRYPTION_SECRET: "s" });
    assert.equal(r.status, 0, r.stderr);
    const services = r.stdout.slice(r.stdout.search(/^services:\n/m));
    const blocks = new Map<string, string>();
    for (const m of services.matchAll(/^ {2}([a-z-]+):\n((?: {4}.*\n| *\n)*)/gm)) blocks.set(m[1]!, m[2]!);
    // The data plane's environment in compose sets none of the shutdown settings: their defaults apply.
    const budget = shutdownBudgetMs(loadDataPlaneConfig({}));
    for (const svc of ["control-plane", "worker", "data-plane"]) {
      const m = /stop_grace_period: ['"]?(\d+)(ms|s|m)['"]?/.exec(blocks.get(svc) ?? "");
      assert.ok(m, `${svc} without stop_grace_period (Docker's default 10 s cuts the last usage flush)`);
      const ms = Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[m[2] as "ms" | "s" | "m"];
      assert.ok(ms > budget, `${svc}: stop_grace_period ${ms} ms <= the data plane's shutdown ${budget} ms`);
    }
  });

  it("refuses to render without ADMIN_TOKEN and KEY_ENCRYPTION_SECRET", () => {
    const r = composeConfig({});
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /ADMIN_TOKEN|KEY_ENCRYPTION_SECRET/);
  });

  it("runs entry points that the build produces", () => {
    for (const entry of [
      "control-plane/src/main.js",
      "control-plane/src/worker/main.js",
      "data-plane/src/main.js",
    ]) {
      assert.ok(existsSync(path.join(root, "dist", entry)), `dist/${entry} is not built`);
    }
  });
});
