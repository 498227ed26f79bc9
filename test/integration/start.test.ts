import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import path from "node:path";
import { eventually } from "../helpers/eventually";
import { acceptsConnection, freePort } from "../helpers/ports";
import { createTestDatabase, type TestDatabase } from "../helpers/postgres";
import { type StartedProcess, startProcess } from "../helpers/process";
import { createTestRedisNamespace, type TestRedisNamespace } from "../helpers/redis";

const root = path.resolve(__dirname, "../../..");

async function portOpen(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(500) });
    return true;
  } catch {
    return false;
  }
}

describe("npm start (scripts/start.js)", function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let ns: TestRedisNamespace;
  let proc: StartedProcess | undefined;
  const ports = { cp: 0, dp: 0, anvil: 0, metrics: 0 };

  before(async () => {
    db = await createTestDatabase();
    ns = createTestRedisNamespace();
    ports.cp = await freePort();
    ports.dp = await freePort();
    ports.anvil = await freePort();
    ports.metrics = await freePort();
  });

  after(async () => {
    await proc?.stop();
    await ns.cleanup();
    await db.drop();
  });

  it("listens on 127.0.0.1 only, serves the printed demo key, gives the demo account a random password and no operator rights, restarts a killed child with backoff, and stops everything on SIGTERM", async () => {
    proc = await startProcess(process.execPath, ["scripts/start.js"], {
      cwd: root,
      env: {
        SKIP_BUILD: "1",
        DATABASE_URL: db.url,
        REDIS_KEY_PREFIX: ns.prefix,
        CONTROL_PLANE_PORT: String(ports.cp),
        DATA_PLANE_PORT: String(ports.dp),
        DEMO_ANVIL_PORT: String(ports.anvil),
        METRICS_PORT: String(ports.metrics),
        LOG_LEVEL: "warn",
        START_RESTART_BASE_MS: "200",
        START_RESTART_MAX_MS: "300",
      },
      readyLine: /Ctrl-C stops everything/,
      timeoutMs: 60_000,
    });
    const out = proc.output();
    const key = /API key:\s+(\S+)/.exec(out)?.[1];
    const url = /local-evm HTTPS: (\S+)/.exec(out)?.[1];
    assert.ok(key && url, `banner incomplete:\n${out}`);
    // The data plane runs what production runs: the C batch scan that the build made (it warns otherwise).
    assert.doesNotMatch(out, /batch scan addon not loaded/);
    assert.ok(url.startsWith(`http://127.0.0.1:${ports.dp}/local-evm/rpc?apikey=`));

    const call = (u: string) =>
      fetch(u, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_chainId" }),
      });
    const ok = await call(url);
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { jsonrpc: "2.0", id: 7, result: "0x7a69" });

    const bad = await call(`http://127.0.0.1:${ports.dp}/local-evm/rpc?apikey=wrong`);
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { error: { code: number } }).error.code, -32016);

    // Every listener it started is on 127.0.0.1 only: 127.0.0.2 (loopback too) is refused by each, while
    // a listener on every interface (the control) accepts it.
    const any = createServer();
    await new Promise<void>((r) => any.listen(0, "0.0.0.0", r));
    try {
      assert.equal(await acceptsConnection("127.0.0.2", (any.address() as AddressInfo).port), true);
    } finally {
      any.close();
    }
    for (const [name, port] of Object.entries(ports)) {
      assert.equal(await acceptsConnection("127.0.0.1", port), true, `${name} not listening on ${port}`);
      assert.equal(await acceptsConnection("127.0.0.2", port), false, `${name} listens beyond 127.0.0.1`);
    }
    assert.match(out, new RegExp(`Metrics: +http://127\\.0\\.0\\.1:${ports.metrics}/metrics`));
    assert.equal((await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).status, 200);
    const ready = await fetch(`http://127.0.0.1:${ports.cp}/readyz`);
    assert.deepEqual(await ready.json(), { status: "ready", postgres: "ok", redis: "ok" });
    assert.equal((await fetch(`http://127.0.0.1:${ports.dp}/metrics`)).status, 404);

    // The demo account: a random password printed once, which logs in, and no operator rights. The
    // operator is the printed operator token.
    const account = /Demo account:\s+(\S+) \/ (\S+) \(random, shown once/.exec(out);
    assert.ok(account, `no demo password in the banner:\n${out}`);
    const [, email, password] = account;
    assert.match(password!, /^[A-Za-z0-9_-]{24}$/);
    assert.ok(!out.includes("demo-password"));
    const operatorToken = /Operator token: (\S+) \(generated/.exec(out)?.[1];
    assert.ok(operatorToken, `no operator token in the banner:\n${out}`);
    const gql = async (query: string, variables: object, token?: string) =>
      (await (
        await fetch(`http://127.0.0.1:${ports.cp}/graphql`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify({ query, variables }),
        })
      ).json()) as { data?: Record<string, { token?: string; isOperator?: boolean }>; errors?: unknown[] };
    const login = await gql(
      "mutation($e: String!, $p: String!) { logIn(email: $e, password: $p) { token } }",
      {
        e: email,
        p: password,
      },
    );
    const demoToken = login.data?.logIn?.token;
    assert.ok(demoToken, JSON.stringify(login));
    assert.equal((await gql("{ me { isOperator } }", {}, demoToken)).data?.me?.isOperator, false);
    const asDemo = await gql("{ operatorWorkspaces { id } }", {}, demoToken);
    assert.ok(asDemo.errors?.length, "the demo account reached an operator query");
    const asOperator = await gql("{ operatorWorkspaces { id } }", {}, operatorToken);
    assert.equal(asOperator.errors, undefined, JSON.stringify(asOperator));

    // The operator token is in the control plane's environment only.
    const pidOf = (name: string): number[] =>
      [...proc!.output().matchAll(new RegExp(`\\[start\\] ${name} started \\(pid (\\d+)\\)`, "g"))].map((m) =>
        Number(m[1]),
      );
    const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    assert.ok(environ(pidOf("control-plane")[0]!).includes(`ADMIN_TOKEN=${operatorToken}`));
    for (const name of ["worker", "data-plane", "anvil"]) {
      const vars = environ(pidOf(name)[0]!);
      assert.ok(!vars.some((v) => v.startsWith("ADMIN_TOKEN=")), `${name} was given ADMIN_TOKEN`);
    }

    // A child that dies is restarted (with a note on stderr) while the others keep running: kill the data
    // plane by its PID, twice in a row (the second delay doubles, 400 ms, capped at 300), and it comes back
    // serving the same key.
    const [cpPid] = pidOf("control-plane");
    const [workerPid] = pidOf("worker");
    assert.ok(cpPid && workerPid, proc.output());
    for (const [round, delay] of [
      [1, 200],
      [2, 300],
    ] as const) {
      const dpPids = pidOf("data-plane");
      const victim = dpPids.at(-1)!;
      process.kill(victim, "SIGKILL");
      // The supervisor notes the death, then starts the replacement after `delay`.
      await eventually(
        () => pidOf("data-plane").length > dpPids.length,
        `the replacement of restart #${round} started`,
        20_000,
        100,
      );
      assert.match(
        proc!.output(),
        new RegExp(
          `data-plane \\(pid ${victim}\\) died \\(signal SIGKILL\\); restarting in ${delay} ms \\(restart #${round}\\)`,
        ),
      );
      const fresh = pidOf("data-plane").at(-1)!;
      assert.notEqual(fresh, victim);
      await eventually(
        async () => (await call(url).catch(() => undefined))?.status === 200,
        `the data plane back after restart #${round}`,
        20_000,
        100,
      );
    }
    // The others were not restarted.
    assert.deepEqual(pidOf("control-plane"), [cpPid]);
    assert.deepEqual(pidOf("worker"), [workerPid]);
    for (const pid of [cpPid, workerPid]) process.kill(pid, 0);

    const code = await proc.stop(20_000);
    assert.equal(code, 0, proc.output());
    for (const p of Object.values(ports)) assert.equal(await portOpen(p), false, `port ${p} still open`);
  });
});
