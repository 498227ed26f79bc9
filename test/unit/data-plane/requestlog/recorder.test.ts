import assert from "node:assert/strict";
import { RedisRequestLog } from "../../../../data-plane/src/requestlog/recorder";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { REQUEST_LOG_STREAM_FIELD, type RequestLogRecord } from "../../../../shared/src/requestlog/contract";

const names = new RedisNames("t:");

function record(i: number): RequestLogRecord {
  return {
    time: 1_700_000_000_000 + i,
    workspaceId: "00000000-0000-4000-8000-000000000001",
    appId: null,
    network: "evm",
    transport: "http",
    method: "eth_call",
    httpStatus: 200,
    category: ErrorCategory.Success,
    reason: "",
    latencyMs: 1,
    requestId: `r-${i}`,
    item: 0,
    clientIp: null,
  };
}

/** A stream stand-in: records XADD calls; `fail` makes the next calls reject. */
class FakeRedis {
  entries: { key: string; args: (string | number)[] }[] = [];
  fail = 0;
  async xadd(key: string, ...args: (string | number)[]): Promise<string | null> {
    if (this.fail > 0) {
      this.fail--;
      throw new Error("redis down");
    }
    this.entries.push({ key, args });
    return `${this.entries.length}-0`;
  }
  hashes = new Map<string, Map<string, number>>();
  ttls = new Map<string, number>();
  async hincrby(key: string, field: string, n: number): Promise<number> {
    if (this.fail > 0) {
      this.fail--;
      throw new Error("redis down");
    }
    const h = this.hashes.get(key) ?? new Map<string, number>();
    this.hashes.set(key, h);
    h.set(field, (h.get(field) ?? 0) + n);
    return h.get(field)!;
  }
  async expire(key: string, seconds: number): Promise<number> {
    this.ttls.set(key, seconds);
    return 1;
  }
  batches(): { batchId: string; records: RequestLogRecord[] }[] {
    return this.entries.map((e) => {
      const i = e.args.indexOf(REQUEST_LOG_STREAM_FIELD);
      return JSON.parse(String(e.args[i + 1]));
    });
  }
}

const cfg = { samplePercent: 1, flushIntervalMs: 1_000, maxPending: 10, streamMaxLen: 1_000 };

describe("data-plane: RedisRequestLog", () => {
  it("always wants errors; successes at the sample rate (0% none, 100% all, 50% about half)", () => {
    const redis = new FakeRedis();
    const none = new RedisRequestLog(redis, names, { ...cfg, samplePercent: 0 });
    const all = new RedisRequestLog(redis, names, { ...cfg, samplePercent: 100 });
    const half = new RedisRequestLog(redis, names, { ...cfg, samplePercent: 50 });
    let n0 = 0;
    let n100 = 0;
    let n50 = 0;
    for (let i = 0; i < 10_000; i++) {
      if (none.wants(ErrorCategory.Success)) n0++;
      if (all.wants(ErrorCategory.Success)) n100++;
      if (half.wants(ErrorCategory.Success)) n50++;
    }
    assert.equal(n0, 0);
    assert.equal(n100, 10_000);
    assert.ok(n50 > 4_000 && n50 < 6_000, `50%: ${n50}`);
    for (const c of Object.values(ErrorCategory)) {
      if (c !== ErrorCategory.Success) assert.equal(none.wants(c), true, c);
    }
  });

  it("samples each success independently at the rate: 1% and 10% over a million, with geometric gaps", () => {
    for (const percent of [1, 10, 0.5]) {
      const log = new RedisRequestLog(new FakeRedis(), names, { ...cfg, samplePercent: percent });
      const p = percent / 100;
      const n = 1_000_000;
      const gaps = new Map<number, number>();
      let sampled = 0;
      let gap = 0;
      for (let i = 0; i < n; i++) {
        if (log.wants(ErrorCategory.Success)) {
          sampled++;
          gaps.set(gap, (gaps.get(gap) ?? 0) + 1);
          gap = 0;
        } else gap++;
      }
      // Binomial(n, p): 5 standard deviations either side.
      const sd = Math.sqrt(n * p * (1 - p));
      assert.ok(Math.abs(sampled - n * p) < 5 * sd, `${percent}%: ${sampled} of ${n}`);
      // Bernoulli trials' gaps: P(gap = k) = (1 - p)^k p, so the shares of gaps 0 and 1 are p and (1 - p) p.
      for (const k of [0, 1]) {
        const want = (1 - p) ** k * p;
        const got = (gaps.get(k) ?? 0) / sampled;
        const sdk = Math.sqrt((want * (1 - want)) / sampled);
        assert.ok(Math.abs(got - want) < 5 * sdk, `${percent}%: gap ${k} share ${got} vs ${want}`);
      }
      // Errors are all logged, and do not move the successes' sampling.
      assert.equal(log.wants(ErrorCategory.NodeError), true);
    }
  });

  it("writes one stream entry per flush, to the request-log stream, with MAXLEN", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, cfg);
    for (let i = 0; i < 3; i++) log.record(record(i));
    await log.flush();
    await log.flush(); // nothing new: no entry
    assert.equal(redis.entries.length, 1);
    assert.equal(redis.entries[0]!.key, names.requestLogStream());
    assert.deepEqual(redis.entries[0]!.args.slice(0, 3), ["MAXLEN", "~", 1_000]);
    assert.deepEqual(
      redis.batches()[0]!.records.map((r) => r.requestId),
      ["r-0", "r-1", "r-2"],
    );
  });

  it("splits a large flush into entries of at most 500 records and 64 KiB, in order", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, { ...cfg, maxPending: 10_000 });
    for (let i = 0; i < 1_200; i++) log.record(record(i));
    await log.flush();
    const b = redis.batches();
    // 500 records of ~200 bytes are over the 64 KiB entry cap: each 500 is cut in two.
    assert.deepEqual(
      b.map((x) => x.records.length),
      [250, 250, 250, 250, 200],
    );
    assert.deepEqual(
      b.flatMap((x) => x.records.map((r) => r.requestId)),
      Array.from({ length: 1_200 }, (_, i) => `r-${i}`),
    );
    assert.equal(new Set(b.map((x) => x.batchId)).size, 5);
  });

  it("keeps a batch whose XADD failed and writes it again, same batchId, before newer ones", async () => {
    const redis = new FakeRedis();
    const errors: unknown[] = [];
    const log = new RedisRequestLog(redis, names, cfg, (e) => errors.push(e));
    log.record(record(1));
    redis.fail = 1;
    await log.flush();
    assert.equal(redis.entries.length, 0);
    assert.equal(errors.length, 1);
    log.record(record(2));
    await log.flush();
    const b = redis.batches();
    assert.equal(b.length, 2);
    assert.deepEqual(
      b.map((x) => x.records[0]!.requestId),
      ["r-1", "r-2"],
    );
    assert.notEqual(b[0]!.batchId, b[1]!.batchId);
    assert.equal(log.written, 2);
  });

  it("bounds memory while Redis is away: records past maxPending are dropped and counted", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, { ...cfg, maxPending: 5 });
    redis.fail = 100;
    for (let i = 0; i < 4; i++) log.record(record(i));
    await log.flush(); // cut into a queued batch, not written
    for (let i = 4; i < 9; i++) log.record(record(i));
    assert.equal(log.dropped, 4);
    redis.fail = 0;
    await log.close();
    assert.deepEqual(
      redis.batches().flatMap((x) => x.records.map((r) => r.requestId)),
      ["r-0", "r-1", "r-2", "r-3", "r-4"],
    );
  });

  it("makes every record safe: a method of U+0000, U+FFFF, lone surrogates or 100 KB is stored cut and replaced, its length kept", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, { ...cfg, maxPending: 100 });
    const hostile = ["\u0000\uffff", "a\ud800b\udc00c", "x".repeat(100_000), "\u001b[31mred", "", "eth_call"];
    hostile.forEach((method, i) => {
      log.record({ ...record(i), method, category: ErrorCategory.ClientError });
    });
    await log.flush();
    const got = redis.batches().flatMap((b) => b.records);
    assert.deepEqual(
      got.map((r) => [r.method, r.methodLength]),
      [
        ["\ufffd\uffff", 2],
        ["a\ufffdb\ufffdc", 5],
        ["x".repeat(100), 100_000],
        ["\ufffd[31mred", 8],
        ["other", undefined],
        ["eth_call", undefined],
      ],
    );
    for (const r of got) {
      assert.ok(r.method.length <= 100);
      for (let i = 0; i < r.method.length; i++)
        assert.ok(r.method.charCodeAt(i) >= 0x20, "no control character");
      // What Postgres gets: the UTF-8 of the text has no NUL and decodes back to the same text.
      const bytes = Buffer.from(r.method, "utf8");
      assert.ok(!bytes.includes(0));
      assert.equal(bytes.toString("utf8"), r.method);
    }
  });

  it("counts errors of no workspace per minute, reason and client prefix in a hash with a TTL, not as records", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, { ...cfg, maxPending: 100_000, keylessTtlSeconds: 600 });
    const minute = 1_700_000_040_000;
    const keyless = (
      i: number,
      reason: string,
      clientIp: string | null,
      category: string = ErrorCategory.ClientError,
    ) => ({
      ...record(i),
      time: minute + (i % 60_000),
      workspaceId: null,
      category,
      reason,
      clientIp,
    });
    for (let i = 0; i < 10_000; i++) log.record(keyless(i, "unknown_key", "203.0.113.0/24"));
    log.record(keyless(1, "rate_limit", "2001:db8:1::/48", ErrorCategory.TooManyRequests));
    log.record(keyless(2, "", null, ErrorCategory.NodeError));
    log.record(keyless(3, "", "203.0.113.0/24", ErrorCategory.Success)); // a public success: not counted
    // The next minute, from more prefixes than a minute keeps.
    for (let i = 0; i < 150; i++)
      log.record({ ...keyless(i, "unknown_key", `10.0.${i}.0/24`), time: minute + 60_000 });
    await log.flush();
    assert.equal(redis.entries.length, 0, "no stream entry: nothing with a workspace was logged");
    const first = redis.hashes.get(names.keylessErrors(minute))!;
    assert.deepEqual(Object.fromEntries(first), {
      "unknown_key|203.0.113.0/24": 10_000,
      "rate_limit|2001:db8:1::/48": 1,
      "node_error|unknown": 1,
    });
    assert.equal(redis.ttls.get(names.keylessErrors(minute)), 600);
    const second = redis.hashes.get(names.keylessErrors(minute + 60_000))!;
    assert.equal(second.size, 101, "100 prefixes, then one overflow field");
    assert.equal(second.get("unknown_key|other"), 50);
    assert.equal(log.keyless.total, 10_152);
  });

  it("keeps keyless counts whose write failed and adds them next time", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, cfg);
    const r = {
      ...record(0),
      time: 1_700_000_040_000,
      workspaceId: null,
      category: ErrorCategory.ClientError,
      reason: "unknown_key",
      clientIp: "198.51.100.0/24",
    };
    log.record(r);
    redis.fail = 1;
    await log.flush();
    log.record(r);
    await log.flush();
    assert.equal(
      redis.hashes.get(names.keylessErrors(1_700_000_040_000))!.get("unknown_key|198.51.100.0/24"),
      2,
    );
  });

  it("cuts entries larger than 64 KiB in two, so the stream's bytes stay under MAXLEN x 64 KiB", async () => {
    const redis = new FakeRedis();
    const log = new RedisRequestLog(redis, names, { ...cfg, maxPending: 10_000 });
    // Non-ASCII methods (3 UTF-8 bytes a character, 100 characters): ~500 records of ~0.45 KB.
    for (let i = 0; i < 500; i++) log.record({ ...record(i), method: "\u20ac".repeat(100) });
    await log.flush();
    const sizes = redis.entries.map((e) =>
      Buffer.byteLength(String(e.args[e.args.indexOf(REQUEST_LOG_STREAM_FIELD) + 1])),
    );
    assert.ok(sizes.length > 1, `entries: ${sizes}`);
    for (const n of sizes) assert.ok(n <= 64 * 1024, `entry of ${n} bytes`);
    const ids = redis.batches().flatMap((b) => b.records.map((x) => x.requestId));
    assert.equal(ids.length, 500);
    assert.equal(ids[499], "r-499");
    assert.equal(log.written, 500);
  });
});
