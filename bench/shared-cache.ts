/**
 * Cost of the response cache shared by serving threads (data-plane/src/cache/shared-response-cache.ts)
 * against a thread's own lru-cache (response-cache.ts), per lookup, in one process: `node
 * dist/bench/shared-cache.js` after a build. Not part of `npm run bench` (that gateway runs one thread, which
 * keeps the lru-cache); a number for the hit path of DATA_PLANE_THREADS > 1.
 *
 * Rows, each the median of BENCH_CACHE_ROUNDS (7) interleaved rounds of 1,000 keys read 200 times, keys
 * rebuilt per read as a request builds them (so a string's cached hash does not flatter a Map):
 * - lru: LruResponseCache.get;
 * - shared: SharedResponseCache.get (a thread's kept Reply, checked against the entry's stamp);
 * - shared-copy: SharedStore.get, the lock-probe-copy every first read of an entry by a thread pays;
 * - set: SharedStore.set of a per-block entry (a miss that stores).
 * Sizes: answers of 20 bytes (eth_chainId), 600 and 5,000 (blocks). Time is the thread's CPU time
 * (process.cpuUsage, one thread running), so other work on a shared machine inflates it less than wall time.
 */
import { LruResponseCache } from "../data-plane/src/cache/response-cache";
import { allocateSharedCache, SharedResponseCache } from "../data-plane/src/cache/shared-response-cache";
import { allocateStore, SharedStore } from "../data-plane/src/cache/shared-store";
import { type Reply, ReplyKind } from "../data-plane/src/upstream/reply";

const ROUNDS = Number(process.env.BENCH_CACHE_ROUNDS ?? 7);
const KEYS = 1000;
const READS = 200;

function cpuNsPer(ops: number, f: () => void): number {
  const t0 = process.cpuUsage();
  f();
  const d = process.cpuUsage(t0);
  return ((d.user + d.system) * 1000) / ops;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function main(): void {
  const keys = Array.from(
    { length: KEYS },
    (_, i) => `eth\u0000f\u0000eth_getBlockByNumber\u0000["0x${i.toString(16)}",false]`,
  );
  const rows: { size: number; lru: number; shared: number; sharedCopy: number; set: number }[] = [];
  for (const size of [20, 600, 5000]) {
    const reply: Reply = {
      tail: `,"result":"${"a".repeat(size)}"}`,
      kind: ReplyKind.Result,
      category: "Success",
    };
    const lru = new LruResponseCache(64 << 20, "first");
    const shared = new SharedResponseCache(allocateSharedCache(64 << 20, "first"), { mergeWaitMs: 1000 });
    const store = new SharedStore(allocateStore(64 << 20));
    const written = new SharedStore(allocateStore(64 << 20));
    for (const k of keys) {
      lru.set(k, reply, undefined);
      shared.set(k, reply, undefined);
      store.set(k, reply.tail, undefined);
    }
    const read = (get: (k: string) => unknown) => () => {
      let n = 0;
      for (let r = 0; r < READS; r++)
        for (const k of keys) if (get(k.slice(0, -1) + k.charAt(k.length - 1)) !== undefined) n++;
      if (n !== READS * KEYS) throw new Error("a lookup missed");
    };
    const t = {
      lru: [] as number[],
      shared: [] as number[],
      sharedCopy: [] as number[],
      set: [] as number[],
    };
    for (let round = 0; round < ROUNDS; round++) {
      t.lru.push(
        cpuNsPer(
          READS * KEYS,
          read((k) => lru.get(k)),
        ),
      );
      t.shared.push(
        cpuNsPer(
          READS * KEYS,
          read((k) => shared.get(k)),
        ),
      );
      t.sharedCopy.push(
        cpuNsPer(
          READS * KEYS,
          read((k) => store.get(k)),
        ),
      );
      t.set.push(
        cpuNsPer(20 * KEYS, () => {
          for (let r = 0; r < 20; r++) for (const k of keys) written.set(k, reply.tail, 2000);
        }),
      );
    }
    rows.push({
      size,
      lru: median(t.lru),
      shared: median(t.shared),
      sharedCopy: median(t.sharedCopy),
      set: median(t.set),
    });
  }
  console.log(
    "| answer bytes | lru get ns | shared get ns (kept) | shared get ns (copy out) | shared set ns |",
  );
  console.log("|---:|---:|---:|---:|---:|");
  for (const r of rows)
    console.log(
      `| ${r.size} | ${r.lru.toFixed(0)} | ${r.shared.toFixed(0)} | ${r.sharedCopy.toFixed(0)} | ${r.set.toFixed(0)} |`,
    );
}

main();
