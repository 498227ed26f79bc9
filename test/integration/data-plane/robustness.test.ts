import assert from "node:assert/strict";
import { type AddressInfo, connect, createServer } from "node:net";
import path from "node:path";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { acceptsConnection, freePort } from "../../helpers/ports";
import { startProcess } from "../../helpers/process";
import { createTestRedisNamespace } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";

/** mulberry32: small seeded PRNG so a failing fuzz run can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rowsByReason = new Map(Object.values(GatewayError).map((r) => [r.reason, r]));

/** Asserts a response is a contract answer: 204, a JSON-RPC response (or array), or an error-table row. */
function assertContractAnswer(status: number, text: string, label: string): void {
  if (status === 204) {
    assert.equal(text, "", label);
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    assert.fail(`${label}: non-JSON body with status ${status}: ${text.slice(0, 200)}`);
  }
  const check = (el: Record<string, unknown>, whole: boolean) => {
    assert.equal(el.jsonrpc, "2.0", label);
    assert.ok("id" in el, label);
    if ("result" in el) return;
    const error = el.error as { code: number; data?: { reason?: string; category?: string } };
    assert.equal(typeof error.code, "number", label);
    const reason = error.data?.reason;
    if (reason === undefined) return; // a node's own error, passed through
    const row = rowsByReason.get(reason);
    assert.ok(row, `${label}: unknown reason ${reason}`);
    assert.equal(error.code, row.code, label);
    assert.equal(error.data?.category, row.category, label);
    if (whole) assert.equal(status, row.httpStatus, `${label}: ${text.slice(0, 200)}`);
  };
  if (Array.isArray(body)) {
    assert.equal(status, 200, label);
    for (const el of body) check(el as Record<string, unknown>, false);
  } else {
    check(body as Record<string, unknown>, status !== 200);
  }
}

describe("data plane under bad input", function () {
  this.timeout(120_000);
  let stub: StubUpstream;
  let gw: Gateway;
  let url: string;

  before(async () => {
    stub = await new StubUpstream().start();
    let key = "";
    gw = await startGateway({ BODY_TIMEOUT_MS: "1000" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      key = await s.putKey();
    });
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await stub?.stop();
  });

  it("answers garbage bytes, truncated JSON, deep nesting and odd shapes with error-table rows", async () => {
    const bodies = [
      Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x80]).toString("latin1"),
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"',
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}}',
      `${"[".repeat(50_000)}${"]".repeat(50_000)}`,
      `${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)}`,
      `[${"[".repeat(1000)}${"]".repeat(1000)}]`,
      "true",
      '"just a string"',
      "[null]",
      '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":"0x"}',
      '{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"}',
      '{"__proto__":{"jsonrpc":"2.0"},"id":1,"method":"eth_chainId"}',
      "",
      " ",
    ];
    for (const body of bodies) {
      const r = await post(url, body);
      assertContractAnswer(r.status, r.text, body.slice(0, 40));
      assert.notEqual(r.status, 500, body.slice(0, 40));
    }
  });

  it("closes a slow-body (slowloris) request after BODY_TIMEOUT_MS and stays up", async () => {
    const started = Date.now();
    const closed = await new Promise<number>((resolve) => {
      const sock = connect(gw.port(), "127.0.0.1");
      sock.on("error", () => undefined);
      sock.write(
        `POST /eth/rpc?apikey=${new URL(url).searchParams.get("apikey")} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n`,
      );
      const timer = setInterval(() => {
        if (!sock.destroyed) sock.write("{");
      }, 100);
      sock.on("close", () => {
        clearInterval(timer);
        resolve(Date.now() - started);
      });
    });
    assert.ok(closed >= 900 && closed < 4000, `closed after ${closed} ms`);
    assert.equal((await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" })).status, 200);
  });

  it("pipelined requests (not supported) close the connection; the server stays up; one at a time works", async () => {
    const body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';
    const key = new URL(url).searchParams.get("apikey");
    const req = `POST /eth/rpc?apikey=${key} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const exchange = (payload: string, wantAnswers: number) =>
      new Promise<{ text: string; closed: boolean }>((resolve) => {
        const sock = connect(gw.port(), "127.0.0.1", () => sock.write(payload));
        let text = "";
        const done = (closed: boolean) => {
          sock.destroy();
          resolve({ text, closed });
        };
        sock.on("error", () => undefined);
        sock.on("data", (c) => {
          text += c.toString("latin1");
          if ((text.match(/HTTP\/1\.1 200/g) ?? []).length >= wantAnswers) done(false);
        });
        sock.on("close", () => done(true));
        setTimeout(() => done(false), 5_000);
      });
    await post(url, body); // the answer is cached: even cache hits are answered asynchronously
    const piped = await exchange(req + req, 2);
    assert.equal(
      piped.closed,
      true,
      `pipelined: expected the connection closed, got ${piped.text.slice(0, 80)}`,
    );
    const single = await exchange(req, 1);
    assert.equal(single.closed, false);
    assert.match(single.text, /^HTTP\/1\.1 200/);
    assert.equal((await post(url, body)).status, 200);
  });

  it("fuzz: thousands of random bodies all get contract answers; process stays up; RSS bounded", async () => {
    const rand = prng(0xc0ffee);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const methods = [
      "eth_chainId",
      "eth_blockNumber",
      "eth_getBalance",
      "author_rotateKeys",
      "",
      "x",
      "ü",
      "debug_x",
    ];
    const ids = [
      "1",
      '"s"',
      "null",
      "1e999",
      "123456789012345678901234567890",
      "-0",
      "{}",
      "[]",
      "true",
      '"\\u0000"',
    ];
    const paramsList = ["[]", "{}", '["latest"]', "null", '"x"', "1", `[${'"a",'.repeat(50)}1]`];
    const element = (): string => {
      const parts: string[] = [];
      if (rand() < 0.9) parts.push(`"jsonrpc":${pick(['"2.0"', '"1.0"', "2", "null"])}`);
      if (rand() < 0.9)
        parts.push(`"method":${rand() < 0.8 ? JSON.stringify(pick(methods)) : pick(["1", "null", "[]"])}`);
      if (rand() < 0.7) parts.push(`"id":${pick(ids)}`);
      if (rand() < 0.5) parts.push(`"params":${pick(paramsList)}`);
      return `{${parts.join(",")}}`;
    };
    const body = (): string => {
      const kind = rand();
      if (kind < 0.15) {
        const len = Math.floor(rand() * 200);
        let s = "";
        for (let i = 0; i < len; i++) s += String.fromCharCode(Math.floor(rand() * 256));
        return s;
      }
      if (kind < 0.5) return element();
      if (kind < 0.75) {
        const n = Math.floor(rand() * 8);
        return `[${Array.from({ length: n }, () => (rand() < 0.8 ? element() : pick(["1", "null", '"x"', "[]"]))).join(",")}]`;
      }
      const valid = element();
      const cut = Math.floor(rand() * valid.length);
      return rand() < 0.5
        ? valid.slice(0, cut)
        : `${valid.slice(0, cut)}${pick(["}", "]", ",", '"', "\\"])}${valid.slice(cut)}`;
    };
    const N = 3000;
    const rssBefore = process.memoryUsage().rss;
    let i = 0;
    const worker = async () => {
      while (i < N) {
        const b = body();
        i++;
        const ct = rand() < 0.05 ? "text/plain" : "application/json";
        const r = await post(url, b, { "content-type": ct });
        assertContractAnswer(r.status, r.text, `fuzz body ${JSON.stringify(b.slice(0, 80))}`);
        assert.notEqual(r.status, 500, `500 for ${JSON.stringify(b.slice(0, 80))}`);
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    const healthy = await fetch(`${gw.base}/healthz`);
    assert.equal(healthy.status, 200);
    const grownMb = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
    assert.ok(grownMb < 150, `RSS grew ${grownMb.toFixed(0)} MB`);
  });
});

describe("data plane as a process (dist/data-plane/src/main.js)", function () {
  this.timeout(60_000);

  it("serves /metrics on METRICS_PORT only (404 on the public port), on 127.0.0.1 unless METRICS_HOST says otherwise", async () => {
    const ns = createTestRedisNamespace();
    const seeder = new RedisSeeder(ns.prefix);
    const stub = await new StubUpstream().start();
    const main = path.resolve(__dirname, "../../../data-plane/src/main.js");
    // The control for the 127.0.0.2 probes below: a listener on every interface accepts it.
    const any = createServer();
    await new Promise<void>((r) => any.listen(0, "0.0.0.0", r));
    try {
      assert.equal(await acceptsConnection("127.0.0.2", (any.address() as AddressInfo).port), true);
      await seeder.putNetwork(evmNetwork("eth", [{ id: "stub-metrics-upstream", httpUrl: stub.url }]));
      const key = await seeder.putKey();
      for (const metricsHost of [undefined, "0.0.0.0"]) {
        const port = await freePort();
        const metricsPort = await freePort();
        const proc = await startProcess(process.execPath, [main], {
          env: {
            DATA_PLANE_PORT: String(port),
            DATA_PLANE_HOST: "127.0.0.1",
            DATA_PLANE_THREADS: "1",
            METRICS_PORT: String(metricsPort),
            ...(metricsHost === undefined ? {} : { METRICS_HOST: metricsHost }),
            REDIS_KEY_PREFIX: ns.prefix,
            LOG_LEVEL: "info",
          },
          ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        });
        try {
          const call = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
          assert.equal((await post(`http://127.0.0.1:${port}/eth/rpc?apikey=${key}`, call)).status, 200);
          for (const method of ["GET", "POST"]) {
            const pub = await fetch(`http://127.0.0.1:${port}/metrics`, { method });
            assert.equal(pub.status, 404, `${method} /metrics on the public port`);
            const body = await pub.text();
            assert.equal(JSON.parse(body).error.code, -32601);
            assert.ok(!body.includes("rpcgw_") && !body.includes("stub-metrics-upstream"));
          }
          const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
          assert.equal(scraped.status, 200);
          const text = await scraped.text();
          assert.match(text, /^rpcgw_requests_total\{network="eth",category="Success"\} 1$/m);
          assert.match(text, /stub-metrics-upstream/);
          assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/`)).status, 404);
          assert.equal(
            (await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: "POST" })).status,
            405,
          );
          assert.equal(
            await acceptsConnection("127.0.0.2", metricsPort),
            metricsHost === "0.0.0.0",
            `METRICS_HOST ${metricsHost ?? "unset"}: reachable beyond 127.0.0.1?`,
          );
          assert.equal(await proc.stop(10_000), 0, proc.output());
        } finally {
          await proc.stop();
        }
      }
    } finally {
      any.close();
      await stub.stop();
      await seeder.close();
      await ns.cleanup();
    }
  });

  it("becomes ready, drains an in-flight request on SIGTERM and exits 0", async () => {
    const ns = createTestRedisNamespace();
    const seeder = new RedisSeeder(ns.prefix);
    const stub = await new StubUpstream().start();
    try {
      await seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      const key = await seeder.putKey();
      const port = await freePort();
      const main = path.resolve(__dirname, "../../../data-plane/src/main.js");
      const proc = await startProcess(process.execPath, [main], {
        env: {
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          REDIS_KEY_PREFIX: ns.prefix,
          LOG_LEVEL: "info",
        },
        ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
      });
      try {
        stub.delayMs = 700;
        const inFlight = post(`http://127.0.0.1:${port}/eth/rpc?apikey=${key}`, {
          jsonrpc: "2.0",
          id: 42,
          method: "eth_getCode",
          params: ["0x00", "pending"],
        });
        await sleep(200);
        proc.child.kill("SIGTERM");
        const r = await inFlight;
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.id, 42);
        const code = await new Promise<number | null>((resolve) => {
          if (proc.child.exitCode !== null) resolve(proc.child.exitCode);
          else proc.child.once("exit", (c) => resolve(c));
        });
        assert.equal(code, 0, proc.output());
      } finally {
        await proc.stop();
      }
    } finally {
      await stub.stop();
      await seeder.close();
      await ns.cleanup();
    }
  });
});
