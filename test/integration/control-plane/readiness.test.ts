import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { loadConfig } from "../../../control-plane/src/config";
import { type ControlPlane, createControlPlane } from "../../../control-plane/src/server";
import { eventually } from "../../helpers/eventually";
import { createTestDatabase, type TestDatabase } from "../../helpers/postgres";
import { PrivateRedis } from "../../helpers/redis-server";
import { TcpProxy } from "../data-plane/ratelimit/tcp-proxy";

interface Probe {
  status: number;
  body: { status: string; postgres?: string; redis?: string };
}

/**
 * The control plane's /readyz against real dependencies taken away: a private redis-server this test shuts
 * down and starts again, and Postgres behind a TCP pass-through it cuts (the shared Postgres itself stays
 * up for everyone else). /healthz is liveness and stays 200 throughout.
 */
describe("control plane: /readyz checks Postgres and Redis, /healthz stays liveness", function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let redis: PrivateRedis;
  let pg: TcpProxy;
  let cp: ControlPlane;
  let base = "";

  before(async () => {
    db = await createTestDatabase();
    redis = await new PrivateRedis().start();
    const target = new URL(db.url);
    pg = new TcpProxy(target.hostname, Number(target.port || 5432));
    await pg.start();
    const viaProxy = new URL(db.url);
    viaProxy.port = String(pg.port);
    cp = await createControlPlane(
      loadConfig({
        DATABASE_URL: viaProxy.toString(),
        REDIS_URL: redis.url,
        CONTROL_PLANE_PORT: "0",
        CONTROL_PLANE_HOST: "127.0.0.1",
        LOG_LEVEL: "silent",
        // The publication retries every 100 ms while Redis is down: the control plane keeps working.
        PUBLICATION_RETRY_MAX_MS: "100",
      }),
    );
    base = `http://127.0.0.1:${cp.port}`;
  });

  after(async () => {
    await cp?.close();
    await pg?.cut();
    await redis?.stop();
    await db?.drop();
  });

  const probe = async (path: string): Promise<Probe> => {
    const res = await fetch(`${base}${path}`);
    return { status: res.status, body: (await res.json()) as Probe["body"] };
  };

  /** Polls /readyz until it answers `status` (each check's result lives 1 s), failing after 10 s. */
  const readyzUntil = async (status: number): Promise<Probe> => {
    let last: Probe | undefined;
    return eventually(
      async () => {
        last = await probe("/readyz");
        return last.status === status ? last : undefined;
      },
      `/readyz answering ${status} (last ${JSON.stringify(last)})`,
    );
  };

  it("is ready with both up; 503 naming Redis while Redis is down, ready again once it is back", async () => {
    assert.deepEqual(await probe("/readyz"), {
      status: 200,
      body: { status: "ready", postgres: "ok", redis: "ok" },
    });
    await redis.shutdownNoSave();
    assert.deepEqual((await readyzUntil(503)).body, { status: "not ready", postgres: "ok", redis: "down" });
    assert.deepEqual(await probe("/healthz"), { status: 200, body: { status: "ok" } });
    await redis.start();
    assert.deepEqual((await readyzUntil(200)).body, { status: "ready", postgres: "ok", redis: "ok" });
  });

  it("503 naming Postgres while Postgres cannot be reached, ready again once it can", async () => {
    await pg.cut();
    assert.deepEqual((await readyzUntil(503)).body, { status: "not ready", postgres: "down", redis: "ok" });
    assert.deepEqual(await probe("/healthz"), { status: 200, body: { status: "ok" } });
    await pg.start();
    assert.deepEqual((await readyzUntil(200)).body, { status: "ready", postgres: "ok", redis: "ok" });
  });

  it("a flood of /readyz costs at most one PING per second of Redis, and every request is answered", async () => {
    // A client of its own (it sends no PING): Redis's own count of the control plane's PINGs.
    const admin = new Redis(redis.url);
    const pings = async () =>
      Number(/cmdstat_ping:calls=(\d+)/.exec(await admin.info("commandstats"))?.[1] ?? 0);
    const before = await pings();
    const t0 = Date.now();
    const answers = await Promise.all(Array.from({ length: 300 }, () => probe("/readyz")));
    const seconds = (Date.now() - t0) / 1000;
    assert.ok(answers.every((a) => a.status === 200));
    const sent = (await pings()) - before;
    admin.disconnect();
    assert.ok(sent <= Math.ceil(seconds) + 1, `${sent} PINGs for 300 probes in ${seconds.toFixed(1)} s`);
  });
});
