import { LruResponseCache, NoopResponseCache } from "../../../../data-plane/src/cache/response-cache";
import { type ForwardDeps } from "../../../../data-plane/src/forward/forward";
import { ConcurrencyLimiter } from "../../../../data-plane/src/limits/concurrency";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { type MethodPolicy } from "../../../../data-plane/src/policy/method-policy";
import type { RpcCall } from "../../../../data-plane/src/rpc/parse";
import type { NetworkPool, OutgoingCall } from "../../../../data-plane/src/upstream/network-pool";
import { type CallResult, ReplyKind } from "../../../../data-plane/src/upstream/reply";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

/** NoopMetrics that keeps the cache hit / miss calls. */
export function cacheMetrics(): NoopMetrics & { seen: boolean[] } {
  const seen: boolean[] = [];
  const m = Object.assign(new NoopMetrics(), { seen });
  (m as { cache: (network: string, hit: boolean) => void }).cache = (_n, hit) => {
    seen.push(hit);
  };
  return m;
}

/** A pool stand-in: the core reads `record`, `cacheHead`, `finalizedHead`, `observeHead`, `call`, `callBatch`. */
export class FakePool {
  head = 100;
  finalized = -1;
  observed: number[] = [];
  calls: { call: OutgoingCall; paramsJson: string | undefined }[] = [];
  answer: CallResult = ok(',"result":"0x1"}');
  constructor(readonly record: NetworkRecord) {}
  cacheHead(): number {
    return this.head;
  }
  finalizedHead(): number {
    return this.finalized;
  }
  observeHead(n: number): void {
    this.observed.push(n);
  }
  call(call: OutgoingCall, paramsJson?: string): Promise<CallResult> {
    this.calls.push({ call, paramsJson });
    return new Promise((r) => setImmediate(() => r(this.answer)));
  }
  batches: OutgoingCall[][] = [];
  batchAnswer: CallResult[] | undefined;
  /** What NetworkPool.exchangesFor answers: the upstream exchanges a batch is spread over. */
  exchanges = 1;
  exchangesFor(_calls: readonly OutgoingCall[]): number {
    return this.exchanges;
  }
  callBatch(calls: OutgoingCall[]): Promise<CallResult[]> {
    this.batches.push(calls);
    return new Promise((r) => setImmediate(() => r(this.batchAnswer ?? calls.map(() => this.answer))));
  }
}

export function ok(tail: string, kind: ReplyKind = ReplyKind.Result): CallResult {
  return { ok: true, reply: { tail, kind, category: "Success" } };
}

export const network = { slug: "eth", maxLogsBlockRange: 1000 } as unknown as NetworkRecord;
export const blockDebug: MethodPolicy = {
  check: (m) => (m.startsWith("debug_") ? `${m} is not available` : undefined),
};

/** A parsed call; idText null = a notification (no id). */
export function call(method: string, params?: unknown, idText: string | null = "1"): RpcCall {
  return { method, params, idText: idText ?? undefined } as RpcCall;
}

export function setup(cacheOn = true) {
  const pool = new FakePool(network);
  const metrics = cacheMetrics();
  const deps: ForwardDeps = {
    cache: cacheOn ? new LruResponseCache(1 << 20, "first") : new NoopResponseCache(),
    metrics,
    flights: new ConcurrencyLimiter(4, 1),
    config: { CACHE_PER_BLOCK_TTL_MS: 60_000 },
  };
  const f = (id: string) => deps.flights.flight(id);
  return { pool, metrics, deps, asPool: pool as unknown as NetworkPool, f };
}
