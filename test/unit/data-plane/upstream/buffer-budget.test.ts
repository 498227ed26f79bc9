import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Worker } from "node:worker_threads";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import { BufferBudget, SharedBufferBudget } from "../../../../data-plane/src/upstream/buffer-budget";
import {
  ExchangeKind,
  INVALID_REPLY,
  type ReplyBody,
  Upstream,
} from "../../../../data-plane/src/upstream/upstream";

const KiB = 1024;

/** A budget that records the lowest and highest `used` it ever had (never negative, never over the limit). */
class WatchedBudget extends BufferBudget {
  min = 0;
  max = 0;
  override take(n: number): boolean {
    const ok = super.take(n);
    this.max = Math.max(this.max, this.used);
    return ok;
  }
  override release(n: number): void {
    super.release(n);
    this.min = Math.min(this.min, this.used);
  }
}

/**
 * Loopback server: the request body (JSON) says what to answer: `bytes` of body in 16 KiB chunks, `status`,
 * `cut` (destroy the socket after that many bytes), `stallAfter` (stop sending after that many, so the
 * client's body timeout fires), `length` (declare a Content-Length).
 */
async function startServer(): Promise<{ url: string; server: Server }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const o = JSON.parse(body) as {
        bytes: number;
        status?: number;
        cut?: number;
        stallAfter?: number;
        length?: boolean;
      };
      const text = `{"jsonrpc":"2.0","id":1,"result":"${"a".repeat(Math.max(0, o.bytes - 34))}"}`;
      res.writeHead(o.status ?? 200, {
        "content-type": "application/json",
        ...(o.length ? { "content-length": String(text.length) } : {}),
      });
      let sent = 0;
      const step = () => {
        if (res.destroyed) return;
        if (o.cut !== undefined && sent >= o.cut) {
          res.destroy();
          return;
        }
        if (o.stallAfter !== undefined && sent >= o.stallAfter) return; // the socket stays open, silent
        if (sent >= text.length) {
          res.end();
          return;
        }
        const piece = text.slice(sent, sent + 16 * KiB);
        sent += piece.length;
        res.write(piece, () => setImmediate(step));
      };
      step();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe("data plane: process-wide budget of buffered upstream bytes", function () {
  this.timeout(20_000);
  let srv: { url: string; server: Server };
  before(async () => {
    srv = await startServer();
  });
  after(async () => {
    srv.server.closeAllConnections();
    await new Promise<void>((r) => srv.server.close(() => r()));
  });

  const make = (budget: BufferBudget, maxResponseBytes = 256 * KiB, timeoutMs = 5_000) =>
    new Upstream(
      { id: "u", httpUrl: srv.url, wsUrl: null, weight: 1 },
      {
        timeoutMs,
        connections: 16,
        breakerThreshold: 1,
        breakerCooldownMs: 60_000,
        maxResponseBytes,
        bufferBudget: budget,
      },
    );
  // A reply under 64 bytes stands for an invalid JSON-RPC answer (the `bad` path after a 2xx body).
  const check = (reply: ReplyBody) => (reply.text.length >= 64 ? reply.text.length : INVALID_REPLY);
  const ask = (u: Upstream, o: object, kind: ExchangeKind = ExchangeKind.Light) =>
    u.exchange(JSON.stringify(o), kind, check);

  it("BufferBudget: take refuses past the limit and takes nothing then; release gives back", () => {
    const b = new BufferBudget(100);
    assert.equal(b.take(60), true);
    assert.equal(b.take(41), false);
    assert.equal(b.used, 60);
    assert.equal(b.refused, 1);
    assert.equal(b.take(40), true);
    assert.equal(b.fits(1), false);
    b.release(100);
    assert.equal(b.used, 0);
    assert.equal(b.fits(100), true);
  });

  it("every way an exchange ends gives back exactly what it took: success, non-2xx, cut, timeout, too_large, declared too_large", async () => {
    const budget = new WatchedBudget(10_000 * KiB);
    const u = make(budget, 256 * KiB, 700);
    const cases: [object, string][] = [
      [{ bytes: 100 * KiB }, "ok"],
      [{ bytes: 100 * KiB, length: true }, "ok"],
      [{ bytes: 50 * KiB, status: 500 }, "bad"],
      [{ bytes: 200 * KiB, cut: 64 * KiB }, "unreachable"],
      [{ bytes: 200 * KiB, stallAfter: 48 * KiB }, "timeout"],
      [{ bytes: 1024 * KiB }, "too_large"],
      [{ bytes: 1024 * KiB, length: true }, "too_large"],
      [{ bytes: 10 }, "bad"], // 2xx but not a usable answer (check says INVALID_REPLY)
    ];
    for (const [o, want] of cases) {
      const r = await ask(u, o);
      assert.equal(r.ok ? "ok" : r.failure, want, JSON.stringify(o));
      assert.equal(budget.used, 0, `${JSON.stringify(o)}: budget back to 0`);
    }
    assert.equal(budget.min, 0, "never negative");
    assert.ok(budget.max > 0, "the bytes were counted while they arrived");
    await u.close();
  });

  it("answers in flight together past the budget: some fail buffer_full (no breaker count, connection dropped), the rest succeed, then 0", async () => {
    const budget = new WatchedBudget(300 * KiB);
    const u = make(budget, 256 * KiB);
    // 8 x 200 KiB at once = 1600 KiB against a 300 KiB budget; each alone is under the 256 KiB cap.
    const rs = await Promise.all(Array.from({ length: 8 }, () => ask(u, { bytes: 200 * KiB })));
    const full = rs.filter((r) => !r.ok && r.failure === "buffer_full").length;
    const ok = rs.filter((r) => r.ok).length;
    assert.ok(full >= 1, `some refused: ${JSON.stringify(rs)}`);
    assert.ok(ok >= 1, `some served: ${JSON.stringify(rs)}`);
    assert.equal(full + ok, 8, JSON.stringify(rs));
    assert.ok(budget.max <= 300 * KiB, `held at most the budget (${budget.max})`);
    assert.equal(budget.used, 0);
    assert.equal(budget.min, 0);
    assert.equal(u.breakerOpen, false, "threshold 1, yet no breaker count");
    assert.equal(u.inFlight, 0);
    // An answer the size of nearly the whole budget fits now.
    const big = await ask(u, { bytes: 250 * KiB });
    assert.equal(big.ok, true);
    assert.equal(budget.used, 0);
    await u.close();
  });

  it("a declared Content-Length that does not fit fails before the body is read; probes that hit it are no verdict", async () => {
    const budget = new WatchedBudget(64 * KiB);
    const u = make(budget, 256 * KiB);
    const r = await ask(u, { bytes: 100 * KiB, length: true }, ExchangeKind.Probe);
    assert.deepEqual(r, { ok: false, failure: "buffer_full" });
    assert.equal(budget.max, 0, "nothing was buffered");
    assert.equal(u.breakerOpen, false, "a probe refused for the gateway's memory says nothing of the node");
    assert.equal(budget.used, 0);
    await u.close();
  });

  it("SharedBufferBudget: budgets on one SharedArrayBuffer share the limit (threads of one process), past 2^31 bytes too", () => {
    const shared = SharedBufferBudget.allocate();
    const a = new SharedBufferBudget(100, shared);
    const b = new SharedBufferBudget(100, shared);
    assert.equal(a.take(60), true);
    assert.equal(b.used, 60);
    assert.equal(b.take(41), false, "what a took counts for b");
    assert.equal(b.refused, 1);
    assert.equal(a.refused, 0, "refusals are counted per thread");
    assert.equal(b.fits(40), true);
    assert.equal(b.take(40), true);
    assert.equal(a.fits(1), false);
    a.release(60);
    assert.equal(b.used, 40);
    b.release(40);
    assert.equal(a.used, 0);
    const big = new SharedBufferBudget(8 * 1024 * 1024 * KiB, SharedBufferBudget.allocate());
    assert.equal(big.take(3 * 1024 * 1024 * KiB), true);
    assert.equal(big.take(5 * 1024 * 1024 * KiB), true);
    assert.equal(big.take(1), false);
    assert.equal(big.used, 8 * 1024 * 1024 * KiB);
  });

  it("SharedBufferBudget: 4 threads taking and releasing at once never pass the limit and end at 0", async () => {
    const shared = SharedBufferBudget.allocate();
    const limit = 1000;
    // Each thread: 200,000 rounds of take(random 1..300) and, when it got it, a release of the same.
    // A take that read a stale `used` would pass the limit; the high-water mark is checked each round.
    const src = `
      const { workerData, parentPort } = require("node:worker_threads");
      const { SharedBufferBudget } = require(workerData.module);
      const b = new SharedBufferBudget(workerData.limit, workerData.shared);
      let max = 0, took = 0;
      for (let i = 0; i < 200000; i++) {
        const n = 1 + ((i * 7919) % 300);
        if (b.take(n)) {
          took++;
          max = Math.max(max, b.used);
          b.release(n);
        }
      }
      parentPort.postMessage({ max, took, refused: b.refused });`;
    const module = require.resolve("../../../../data-plane/src/upstream/buffer-budget");
    const results = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<{ max: number; took: number; refused: number }>((resolve, reject) => {
            const w = new Worker(src, { eval: true, workerData: { module, limit, shared } });
            w.once("message", resolve);
            w.once("error", reject);
          }),
      ),
    );
    const budget = new SharedBufferBudget(limit, shared);
    assert.equal(budget.used, 0, "every take given back");
    for (const r of results) {
      assert.ok(r.max <= limit, `a thread saw ${r.max} held, limit ${limit}`);
      assert.ok(r.took > 0);
    }
  });

  it("UPSTREAM_BUFFER_BUDGET_BYTES defaults to 256 MiB", () => {
    assert.equal(loadDataPlaneConfig({}).UPSTREAM_BUFFER_BUDGET_BYTES, 256 * 1024 * KiB);
  });
});
