import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { load, loadAll } from "js-yaml";

// Static checks of docker/Dockerfile (no Docker engine runs here): what the image is built on, what its
// runtime stage carries, as whom it runs and how it reports health.
const root = path.resolve(__dirname, "../../../..");
const dockerfile = readFileSync(path.join(root, "docker/Dockerfile"), "utf8");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
// biome-ignore lint/suspicious/noExplicitAny: an untyped CommonJS script
const { target } = require(path.join(root, "docker/healthcheck.js")) as any;

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | null;
  body: Instruction[];
}

/** Instructions (continuation lines joined, comments dropped), grouped into stages by FROM. */
function parse(text: string): { args: Map<string, string>; stages: Stage[] } {
  const lines = text.replace(/\\\n/g, " ").split("\n");
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Z]+)\s+(.*)$/.exec(line);
    assert.ok(m, `not an instruction: ${line}`);
    const [, op, rest] = m;
    if (op === "FROM") {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      assert.ok(f, rest);
      stages.push({ from: f[1], name: f[2] ?? null, body: [] });
    } else if (stages.length === 0) {
      assert.equal(op, "ARG", "only ARG before the first FROM");
      const [k, v] = rest.split("=");
      args.set(k, v);
    } else {
      stages[stages.length - 1].body.push({ op, args: rest });
    }
  }
  return { args, stages };
}

const { args, stages } = parse(dockerfile);
const runtime = stages[stages.length - 1];
const ops = (stage: Stage, op: string) => stage.body.filter((i) => i.op === op).map((i) => i.args);

describe("docker/Dockerfile (static)", () => {
  it("builds every stage on a supported Node: the engines major, on Debian 13 (glibc 2.38+)", () => {
    const engineMajor = /\d+/.exec(pkg.engines.node)?.[0];
    assert.ok(stages.length >= 3, "multi-stage: build, production dependencies, runtime");
    for (const s of stages) {
      const image = s.from.replace(/^\$\{(\w+)\}$/, (_, k) => args.get(k) ?? "");
      assert.match(image, new RegExp(`^node:${engineMajor}-trixie-slim$`), `stage ${s.name}: ${s.from}`);
    }
  });

  it("ships only the runtime: no compilers, tests, benches, anvil or npm in the last stage", () => {
    const runs = ops(runtime, "RUN").join("\n");
    assert.doesNotMatch(runs, /apt-get install|npm (ci|install)|node-gyp/);
    const copies = ops(runtime, "COPY");
    for (const c of copies) {
      assert.doesNotMatch(c, /(^|\s)(\/app\/|\.\/)?dist\/?(\s|$)/, `the whole dist: ${c}`);
      assert.doesNotMatch(c, /dist\/(test|bench)|(^|\s)\.?\/?(test|bench)(\/|\s|$)|@foundry-rs|anvil/, c);
    }
    const fromBuild = copies.filter((c) => c.startsWith("--from=build")).map((c) => c.split(/\s+/)[1]);
    assert.deepEqual(fromBuild.filter((p) => p.startsWith("/app/dist/")).sort(), [
      "/app/dist/control-plane",
      "/app/dist/data-plane",
      "/app/dist/shared",
    ]);
    // node_modules come from the production-dependency stage, which removes anvil by name.
    assert.ok(copies.some((c) => /^--from=deps \/app\/node_modules \.\/node_modules$/.test(c)));
    const deps = stages.find((s) => s.name === "deps");
    assert.ok(deps, "a deps stage");
    const depsRun = ops(deps, "RUN").join("\n");
    assert.match(depsRun, /npm ci --omit=dev/);
    assert.match(depsRun, /rm -rf node_modules\/@foundry-rs/);
    assert.match(runs, /rm -rf \/usr\/local\/lib\/node_modules\/npm/);
  });

  it("carries what the processes load: the uWebSockets.js loader, the batch scan addon, the console", () => {
    const copies = ops(runtime, "COPY").join("\n");
    const uwsDep: string = pkg.dependencies["uWebSockets.js"];
    assert.match(uwsDep, /^file:/);
    assert.match(
      copies,
      new RegExp(`/app/${uwsDep.slice("file:".length)} \\./${uwsDep.slice("file:".length)}`),
    );
    assert.match(copies, /json_scan\.node/);
    assert.match(copies, /control-plane\/console\/dist/);
    // Files copied from the build context exist in the repository.
    for (const c of ops(runtime, "COPY").filter((x) => !x.startsWith("--from"))) {
      const parts = c.split(/\s+/);
      for (const src of parts.slice(0, -1)) assert.ok(existsSync(path.join(root, src)), src);
    }
  });

  it("runs every command of compose and Kubernetes from a copied dist directory", () => {
    const copied = ["dist/control-plane/", "dist/data-plane/", "dist/shared/"];
    const commands: string[] = [];
    // biome-ignore lint/suspicious/noExplicitAny: parsed YAML
    const compose = load(readFileSync(path.join(root, "docker/compose.yml"), "utf8")) as any;
    for (const svc of Object.values(compose.services) as { command?: string[] }[]) {
      if (svc.command) commands.push(...svc.command);
    }
    const base = path.join(root, "deploy/kubernetes/base");
    for (const f of readdirSync(base).filter((x) => x.endsWith(".yaml"))) {
      const text = readFileSync(path.join(base, f), "utf8");
      for (const doc of loadAll(text)) {
        // biome-ignore lint/suspicious/noExplicitAny: parsed YAML
        const containers = (doc as any)?.spec?.template?.spec?.containers ?? [];
        for (const c of containers) if (c.image === "rpc-gateway" && c.command) commands.push(...c.command);
      }
    }
    const scripts = commands.filter((c) => c.endsWith(".js"));
    assert.ok(scripts.length >= 4, scripts.join(", "));
    for (const s of scripts)
      assert.ok(
        copied.some((d) => s.startsWith(d)),
        `${s} is not in the image`,
      );
  });

  it("runs as the non-root uid that Kubernetes asserts, and has a HEALTHCHECK after it", () => {
    const users = ops(runtime, "USER");
    assert.equal(users.length, 1);
    const [uid] = users[0].split(":");
    assert.match(uid, /^\d+$/, "numeric, so that runAsNonRoot can be verified");
    assert.notEqual(uid, "0");
    for (const f of ["control-plane.yaml", "data-plane.yaml", "worker.yaml", "migrate-job.yaml"]) {
      const text = readFileSync(path.join(root, "deploy/kubernetes/base", f), "utf8");
      const m = /runAsUser:\s*(\d+)/.exec(text);
      assert.ok(m, `${f}: runAsUser`);
      assert.equal(m[1], uid, f);
    }
    const order = runtime.body.map((i) => i.op);
    assert.ok(order.indexOf("HEALTHCHECK") > order.indexOf("USER"));
    const hc = ops(runtime, "HEALTHCHECK");
    assert.equal(hc.length, 1);
    assert.match(hc[0], /CMD \["node", "docker\/healthcheck\.js"\]/);
    assert.match(ops(runtime, "COPY").join("\n"), /docker\/healthcheck\.js/);
  });

  it("its health check asks the process the container runs", () => {
    assert.equal(target("node dist/data-plane/src/main.js ", {}), "http://127.0.0.1:8080/healthz");
    assert.equal(
      target("node dist/data-plane/src/main.js ", { DATA_PLANE_PORT: "9000", DATA_PLANE_HOST: "::" }),
      "http://127.0.0.1:9000/healthz",
    );
    assert.equal(target("node dist/control-plane/src/main.js ", {}), "http://127.0.0.1:4000/healthz");
    assert.equal(
      target("node dist/control-plane/src/main.js ", {
        CONTROL_PLANE_HOST: "::1",
        CONTROL_PLANE_PORT: "4100",
      }),
      "http://[::1]:4100/healthz",
    );
    assert.equal(target("node dist/control-plane/src/worker/main.js ", {}), null);
    assert.equal(target("node dist/control-plane/src/cli/migrate.js ", {}), null);
  });

  it("keeps host build output out of the build context", () => {
    const ignore = readFileSync(path.join(root, "docker/Dockerfile.dockerignore"), "utf8").split("\n");
    for (const p of ["node_modules", "dist", "data-plane/native/build"]) assert.ok(ignore.includes(p), p);
  });
});
