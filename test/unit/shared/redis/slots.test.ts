import assert from "node:assert/strict";
import { QueueKeys } from "bullmq";
import calculateSlot from "cluster-key-slot";
import { LoginRateLimiter } from "../../../../control-plane/src/auth/login-rate-limit";
import { SignUpRateLimiter } from "../../../../control-plane/src/auth/signup-rate-limit";
import { RedisQuotaStore } from "../../../../data-plane/src/quota/quota-store";
import { readWorkspaceUsage } from "../../../../data-plane/src/quota/read-usage";
import { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import { JobName, nodeJobId, QueueName } from "../../../../shared/src/queue/names";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { hashTagOf, keySlot } from "../../../../shared/src/redis/slots";

/**
 * A stand-in client that records the keys of every script call, MGET and MULTI the real code sends (the
 * code under test builds the key lists; nothing here re-lists them by hand).
 */
class RecordingClient {
  readonly isCluster = false;
  readonly status = "ready";
  /** One entry per script call / MULTI / MGET: the keys it touched. */
  readonly calls: { what: string; keys: string[] }[] = [];
  /** numberOfKeys each defined script declares (undefined: given per call). */
  readonly scripts = new Map<string, number | undefined>();

  defineCommand(name: string, def: { numberOfKeys?: number }): void {
    this.scripts.set(name, def.numberOfKeys);
    (this as unknown as Record<string, unknown>)[name] = async (...args: (string | number)[]) => {
      const n = def.numberOfKeys ?? Number(args.shift());
      this.calls.push({ what: name, keys: args.slice(0, n).map(String) });
      return name === "rgQuotaApply"
        ? [0, 0]
        : name === "rgRateLimitSync"
          ? [0, 0]
          : name === "rgLoginPair"
            ? 0
            : 1;
    };
  }

  async mget(...keys: string[]): Promise<(string | null)[]> {
    this.calls.push({ what: "MGET", keys });
    return keys.map(() => null);
  }

  multi() {
    const keys: string[] = [];
    const replies: [null, number][] = [];
    const add = (k: string, reply: number) => {
      keys.push(k);
      replies.push([null, reply]);
      return chain;
    };
    const chain = {
      incr: (k: string) => add(k, 1),
      expire: (k: string) => add(k, 1),
      pttl: (k: string) => add(k, 1000),
      exec: async () => {
        this.calls.push({ what: "MULTI", keys: [...new Set(keys)] });
        return replies;
      },
    };
    return chain;
  }

  on(): this {
    return this;
  }
  off(): this {
    return this;
  }
  async hdel(): Promise<number> {
    return 0;
  }
}

function slotsOf(keys: string[]): Set<number> {
  return new Set(keys.map(keySlot));
}

describe("shared/redis: Redis Cluster slots", () => {
  it("computes the slot ioredis' cluster-key-slot does, hash tags included", () => {
    // Not "foo{}{bar}": there cluster-key-slot hashes "{bar" where Redis hashes the whole key (an empty
    // first tag); keySlot agrees with Redis (test/integration/redis-cluster checks CLUSTER KEYSLOT).
    const keys = [
      "",
      "a",
      "foo",
      "rg:networks",
      "rg:quota:{ws-1}:d:2026-01-02",
      "{user1000}.following",
      "foo{{bar}}zap",
      "foo{bar}{zap}",
      "{",
      "}{",
      "{a",
      "κλειδί:{ταυτότητα}",
      ...Array.from({ length: 500 }, (_, i) => `rgtest:${i.toString(36)}:key:${(i * 7919).toString(16)}`),
    ];
    for (const k of keys) assert.equal(keySlot(k), calculateSlot(k), k);
  });

  it("hashes on the first non-empty {…} only", () => {
    assert.equal(hashTagOf("rg:quota:{ws}:d:x"), "ws");
    assert.equal(hashTagOf("foo{}{bar}"), "foo{}{bar}", "an empty first tag: the whole key");
    assert.equal(hashTagOf("foo{{bar}}zap"), "{bar");
    assert.equal(hashTagOf("foo{bar}{zap}"), "bar");
    assert.equal(hashTagOf("no-tag"), "no-tag");
    assert.equal(keySlot("{bull}:a:wait"), keySlot("{bull}:b:1"));
  });

  describe("every multi-key script and transaction touches one slot", () => {
    const names = new RedisNames("rg:");

    it("quota flush script (rgQuotaApply): seq, day and month counters of one workspace, across days and months", async () => {
      const c = new RecordingClient();
      const store = new RedisQuotaStore({ redis: c as unknown as RedisClient, names });
      await store.apply(
        "ws-1",
        "instance-a",
        7,
        [
          { dayKey: "2026-01-31", monthKey: "2026-01", units: 3 },
          { dayKey: "2026-02-01", monthKey: "2026-02", units: 4 },
        ],
        "2026-02-01",
        "2026-02",
      );
      assert.equal(c.calls.length, 1);
      assert.equal(c.calls[0]!.keys.length, 7, "seq + current day and month + (day, month) per delta");
      assert.equal(slotsOf(c.calls[0]!.keys).size, 1, c.calls[0]!.keys.join(" "));
    });

    it("rate-limit scripts (rgRateLimitSync, rgRateLimitHeartbeat) declare one key each", () => {
      const c = new RecordingClient();
      new RedisReconciledRateLimiter({ redis: c as unknown as RedisClient, names });
      assert.deepEqual(
        [...c.scripts],
        [
          ["rgRateLimitSync", 1],
          ["rgRateLimitHeartbeat", 1],
        ],
      );
    });

    it("workspace usage read (MGET of today's and this month's counters)", async () => {
      const c = new RecordingClient();
      await readWorkspaceUsage(c as unknown as RedisClient, names, "ws-2", Date.UTC(2026, 4, 31, 23));
      assert.equal(c.calls[0]!.keys.length, 2);
      assert.equal(slotsOf(c.calls[0]!.keys).size, 1);
    });

    it("login and sign-up throttles: one script or MULTI per counter", async () => {
      const c = new RecordingClient();
      await new LoginRateLimiter(c as unknown as RedisClient, names, {
        maxAttemptsPerAddress: 10,
        windowSeconds: 60,
        freeFailures: 5,
        backoffBaseMs: 1000,
        backoffMaxMs: 60_000,
        maxAttemptsPerEmail: 100,
        emailWindowSeconds: 3600,
      }).hit("a@example.com", "10.0.0.1");
      await new SignUpRateLimiter(c as unknown as RedisClient, names, 10, 60).hit("10.0.0.1");
      assert.deepEqual(
        c.calls.map((x) => x.what),
        ["rgLoginPair", "MULTI", "MULTI", "MULTI"],
        "pair back-off, address and email counters of a login, IP counter of a sign-up",
      );
      for (const call of c.calls) assert.equal(call.keys.length, 1, call.keys.join(" "));
    });

    it("BullMQ: with the cluster prefix every key of every queue shares one slot (not with the plain one)", () => {
      const keysOf = (prefix: string) => {
        const qk = new QueueKeys(prefix);
        const out: string[] = [];
        for (const q of Object.values(QueueName)) {
          out.push(...Object.values(qk.getKeys(q)));
          const job = nodeJobId(JobName.ProvisionNode, "3f1c", 2);
          out.push(qk.toKey(q, job), qk.toKey(q, `${job}:lock`), qk.toKey(q, "repeat:republish-all-every"));
        }
        return out;
      };
      assert.equal(names.bullPrefix(true), "{rg:bull}");
      assert.equal(slotsOf(keysOf(names.bullPrefix(true))).size, 1);
      assert.ok(slotsOf(keysOf(names.bullPrefix())).size > 1, "the untagged single-Redis prefix spreads");
      assert.equal(names.bullPrefix(), "rg:bull", "single Redis keeps the name queued jobs already use");
    });

    it("per-workspace and per-node keys carry their tag (rate-limit window, quota, workspace, node)", () => {
      assert.equal(keySlot(names.rateLimitWindow("k1", 100)), keySlot(names.rateLimitWindow("k1", 101)));
      assert.equal(keySlot(names.workspace("ws-3")), keySlot(names.quotaDay("ws-3", "2026-01-01")));
      // `today` reads both daily counters in one MGET.
      assert.equal(
        keySlot(names.quotaDay("ws-3", "2026-01-01")),
        keySlot(names.computeUnitQuotaDay("ws-3", "2026-01-01")),
      );
      assert.equal(keySlot(names.node("n1")), keySlot(names.nodeSessionKeys("n1")));
    });
  });
});
