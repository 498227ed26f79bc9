import { type ErrorRow } from "../../../../shared/src/jsonrpc/errors";
import { logsChunkBlocks, type NetworkRecord } from "../../../../shared/src/redis/records";
import { AT_HEAD, mergeNeeds, type Need, restricts } from "../capabilities";
import { type LogsSplit, planLogsSplit, runLogsSplit } from "../logs-split";
import type { CallResult } from "../reply";
import type { Upstream } from "../upstream";
import type { PoolExchanges } from "./exchanges";
import type { HeadTracker } from "./head-tracker";
import type { PoolMetricHooks } from "./metric-hooks";
import type { Selector } from "./selector";
import { type OutgoingCall, refusedForCapability } from "./wire";

/** Smallest chunk worth its own upstream exchange when spreading a batch. */
const MIN_CHUNK = 10;

const DEFAULT_LOGS_SPLIT_CONCURRENCY = 8;

/** What the batch router reads of the pool's options. */
export interface BatchOptions {
  /** Sub-calls of one split eth_getLogs in flight at once (LOGS_SPLIT_CONCURRENCY); default 8. */
  readonly logsSplitConcurrency?: number;
  /** UPSTREAM_MAX_RESPONSE_BYTES: a merged eth_getLogs answer's cap. */
  readonly maxResponseBytes: number;
  /** The row of a merged eth_getLogs answer over maxResponseBytes (as one node's answer would get). */
  readonly tooLargeRow: ErrorRow;
}

/** What the batch router sends through (PoolExchanges). */
export type BatchExchanges = Pick<PoolExchanges, "single" | "chunk">;

/**
 * A client batch's way upstream: its elements spread in chunks over the healthy nodes (each chunk with
 * failover) and reassembled in order; elements that need a particular node sent together to one that
 * serves them all; an eth_getLogs whose range is split sent as its own sub-calls.
 */
export class BatchRouter {
  constructor(
    private readonly record: () => NetworkRecord,
    private readonly opts: BatchOptions,
    private readonly selector: Selector,
    private readonly heads: HeadTracker,
    private readonly exchanges: BatchExchanges,
    private readonly hooks: PoolMetricHooks,
  ) {}

  /**
   * Forwards a batch: elements are split into chunks spread over the healthy upstreams (each chunk with
   * failover) and reassembled in order. Element i of the result answers calls[i]. An eth_getLogs element
   * whose range is split (see logsSplit) goes out as its own sub-calls, next to the others.
   */
  async call(calls: readonly OutgoingCall[], traceparent?: string): Promise<CallResult[]> {
    let splits: (LogsSplit | undefined)[] | undefined;
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      if (c.method !== "eth_getLogs") continue;
      const split = this.logsSplit(c.params);
      if (split === undefined) continue;
      splits ??= new Array<LogsSplit | undefined>(calls.length);
      splits[i] = split;
    }
    if (splits === undefined) return this.routed(calls, traceparent);
    const rest: OutgoingCall[] = [];
    const restIdx: number[] = [];
    const out = new Array<Promise<CallResult>>(calls.length);
    for (let i = 0; i < calls.length; i++) {
      const split = splits[i];
      if (split !== undefined) out[i] = this.callSplit(calls[i]!.method, split);
      else {
        rest.push(calls[i]!);
        restIdx.push(i);
      }
    }
    if (rest.length > 0) {
      const whole = this.routed(rest, traceparent);
      for (let j = 0; j < restIdx.length; j++) out[restIdx[j]!] = whole.then((r) => r[j]!);
    }
    return Promise.all(out);
  }

  /** A batch's elements routed by their needs (see Selector.need): the plain ones spread, the others together. */
  private async routed(
    calls: readonly OutgoingCall[],
    traceparent: string | undefined,
  ): Promise<CallResult[]> {
    let needs: (Need | undefined)[] | undefined;
    let head = false;
    for (let i = 0; i < calls.length; i++) {
      const need = this.selector.need(calls[i]!);
      if (need === undefined) continue;
      if (need.head === true) head = true;
      if (!restricts(need)) continue;
      needs ??= new Array<Need | undefined>(calls.length);
      needs[i] = need;
    }
    if (needs === undefined) return this.spread(calls, traceparent, head);
    // The elements with a need go together to an upstream that serves them all (one by one when none
    // does); the others are spread as usual.
    const plainIdx: number[] = [];
    const needyIdx: number[] = [];
    for (let i = 0; i < calls.length; i++) (needs[i] === undefined ? plainIdx : needyIdx).push(i);
    const [plain, needy] = await Promise.all([
      plainIdx.length === 0
        ? []
        : this.spread(
            plainIdx.map((i) => calls[i]!),
            traceparent,
            head,
          ),
      this.sendNeedy(
        needyIdx.map((i) => calls[i]!),
        needyIdx.map((i) => needs[i]!),
        traceparent,
      ),
    ]);
    const out = new Array<CallResult>(calls.length);
    for (let j = 0; j < plainIdx.length; j++) out[plainIdx[j]!] = plain[j]!;
    for (let j = 0; j < needyIdx.length; j++) {
      out[needyIdx[j]!] = this.hooks.counted(needs[needyIdx[j]!]!, needy[j]!);
    }
    return out;
  }

  private async sendNeedy(
    calls: OutgoingCall[],
    needs: Need[],
    traceparent: string | undefined,
  ): Promise<CallResult[]> {
    let need: Need | undefined;
    for (const x of needs) need = mergeNeeds(need, x);
    const results = await this.exchanges.chunk(calls, undefined, undefined, need, traceparent);
    if (calls.length === 1 || !refusedForCapability(results[0])) return results;
    return Promise.all(calls.map((c, i) => this.exchanges.single(c, undefined, needs[i])));
  }

  /**
   * Sends a batch's elements in chunks spread over the healthy upstreams; results in order. `head`: some
   * element reads the head, so the chunks go to upstreams at the served head (as many chunks as there
   * are such upstreams) when there are any.
   */
  private async spread(
    calls: readonly OutgoingCall[],
    traceparent?: string,
    head = false,
  ): Promise<CallResult[]> {
    const n = calls.length;
    const need = head ? AT_HEAD : undefined;
    const chunks = head ? Math.min(this.chunksFor(n), this.selector.atHeadCount()) : this.chunksFor(n);
    const size = Math.ceil(n / chunks);
    const parts: Promise<CallResult[]>[] = [];
    // Each chunk starts on a different upstream (failover may still move it).
    const chosen: Upstream[] = [];
    for (let start = 0; start < n; start += size) {
      const first = chunks > 1 ? this.selector.select(chosen, false, need) : undefined;
      if (first !== undefined) chosen.push(first);
      parts.push(this.exchanges.chunk(calls.slice(start, start + size), undefined, first, need, traceparent));
    }
    const results = await Promise.all(parts);
    return results.length === 1 ? results[0]! : results.flat();
  }

  /** Upstream exchanges a batch of `n` is spread over: one per healthy upstream, chunks of >= MIN_CHUNK. */
  chunksFor(n: number): number {
    const healthy = Math.max(1, this.selector.healthyCount());
    return Math.max(1, Math.min(healthy, Math.ceil(n / MIN_CHUNK)));
  }

  /**
   * Upstream exchanges call() starts for `calls`, before any failover or retry: one per split eth_getLogs
   * (its sub-calls run one after another per slot of LOGS_SPLIT_CONCURRENCY, as a single call's do), one
   * for the elements that need a particular upstream, and the chunks the others are spread over (as
   * routed() and spread() decide them). At least 1 for a non-empty batch.
   */
  exchangesFor(calls: readonly OutgoingCall[]): number {
    let apart = 0;
    let needy = 0;
    let plain = 0;
    let head = false;
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      if (c.method === "eth_getLogs" && this.logsSplit(c.params) !== undefined) {
        apart++;
        continue;
      }
      const need = this.selector.need(c);
      if (need?.head === true) head = true;
      if (need !== undefined && restricts(need)) needy = 1;
      else plain++;
    }
    if (plain === 0) return Math.max(1, apart + needy);
    const chunks = head
      ? Math.max(1, Math.min(this.chunksFor(plain), this.selector.atHeadCount()))
      : this.chunksFor(plain);
    return apart + needy + chunks;
  }

  /**
   * Whether call() handles any of `calls` on its own: one that needs a particular upstream (see need;
   * a head read only prefers one), or an eth_getLogs whose range is split (see logsSplit).
   */
  sendsApart(calls: readonly OutgoingCall[]): boolean {
    for (const c of calls) {
      const need = this.selector.need(c);
      if (need !== undefined && restricts(need)) return true;
      if (c.method === "eth_getLogs" && this.logsSplit(c.params) !== undefined) return true;
    }
    return false;
  }

  /**
   * How an eth_getLogs call is split on this network now (logs-split.ts), undefined = send it whole. Tags
   * resolve against cacheHead(), the head the range limit (limits/logs-range.ts) used for the same call.
   */
  logsSplit(params: unknown): LogsSplit | undefined {
    const chunk = logsChunkBlocks(this.record());
    return chunk > 0 ? planLogsSplit(params, this.heads.cacheHead(), chunk) : undefined;
  }

  /**
   * Sends a split eth_getLogs: each sub-call is its own heavy exchange (a heavy slot on its node, no failover
   * of a timeout), started on the healthy upstreams in turn (each once before any twice) and failed over as
   * any call. Never throws.
   */
  async callSplit(method: string, split: LogsSplit): Promise<CallResult> {
    const chosen: Upstream[] = [];
    const out = await runLogsSplit(split, {
      chunk: logsChunkBlocks(this.record()),
      concurrency: this.opts.logsSplitConcurrency ?? DEFAULT_LOGS_SPLIT_CONCURRENCY,
      maxBytes: this.opts.maxResponseBytes,
      tooLarge: this.opts.tooLargeRow,
      send: (params) => {
        let first = this.selector.select(chosen, true);
        if (first === undefined && chosen.length > 0) {
          chosen.length = 0;
          first = this.selector.select(undefined, true);
        }
        if (first !== undefined) chosen.push(first);
        return this.exchanges.single({ method, params }, undefined, undefined, first);
      },
    });
    this.hooks.logsSplit(out.subCalls, out.halvings);
    return out.result;
  }
}
