import { NoopMetrics } from "../../../../../data-plane/src/metrics/metrics";
import type { HedgeOptions } from "../../../../../data-plane/src/upstream/hedge";
import { ExchangeBook } from "../../../../../data-plane/src/upstream/pool/booking";
import type { PoolClock } from "../../../../../data-plane/src/upstream/pool/clock";
import { EmptyRetry } from "../../../../../data-plane/src/upstream/pool/empty-retry";
import { PoolExchanges } from "../../../../../data-plane/src/upstream/pool/exchanges";
import { Failover } from "../../../../../data-plane/src/upstream/pool/failover";
import { HeadTracker } from "../../../../../data-plane/src/upstream/pool/head-tracker";
import { PoolHealth } from "../../../../../data-plane/src/upstream/pool/health";
import { Hedger } from "../../../../../data-plane/src/upstream/pool/hedger";
import { PoolMembership } from "../../../../../data-plane/src/upstream/pool/membership";
import { PoolMetricHooks } from "../../../../../data-plane/src/upstream/pool/metric-hooks";
import { Selector } from "../../../../../data-plane/src/upstream/pool/selector";
import { IdSequence } from "../../../../../data-plane/src/upstream/pool/wire";
import {
  type ExchangeControl,
  type ExchangeFailure,
  type ExchangeKind,
  type ExchangeResult,
  INVALID_REPLY,
  ReplyBody,
  type ReplyCheck,
  Upstream,
  type UpstreamOptions,
} from "../../../../../data-plane/src/upstream/upstream";
import type { NetworkRecord, UpstreamRecord } from "../../../../../shared/src/redis/records";

/**
 * A clock and timers the test moves by hand: `advance` fires the timers that come due, `turn` runs the
 * immediates queued so far (the check phase of an event-loop turn).
 */
export class FakePoolClock implements PoolClock {
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private immediates: (() => void)[] = [];
  private ids = 0;
  mono = 0;

  constructor(public t = Date.now()) {}

  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.mono;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.ids;
    this.timers.push({ at: this.mono + ms, fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((x) => x.id !== handle);
  }
  setImmediate(fn: () => void): void {
    this.immediates.push(fn);
  }
  /** Moves both clocks by `ms` and runs the timers due by then, in order. */
  advance(ms: number): void {
    this.t += ms;
    this.mono += ms;
    const due = this.timers.filter((x) => x.at <= this.mono).sort((a, b) => a.at - b.at);
    this.timers = this.timers.filter((x) => x.at > this.mono);
    for (const x of due) x.fn();
  }
  /** Runs the immediates queued so far; returns how many ran. */
  turn(): number {
    const q = this.immediates;
    this.immediates = [];
    for (const fn of q) fn();
    return q.length;
  }
  get pendingTimers(): number {
    return this.timers.length;
  }
}

/** One exchange a FakeNode got, answered by the test. */
export interface Sent {
  readonly node: string;
  readonly body: string;
  readonly kind: ExchangeKind;
  readonly traceparent: string | undefined;
  cancelled: boolean;
  /** Answers with this 2xx body text (run through the exchange's reply check). */
  answer(text: string): void;
  fail(failure: ExchangeFailure): void;
}

/** Every exchange sent to the fake nodes of a test, in order. */
export class Wire {
  readonly sent: Sent[] = [];
  /** Answers each new exchange at once when set (else the test answers by hand). */
  auto: ((s: Sent) => void) | undefined;

  /** Lets the promise callbacks of answered exchanges run. */
  static async settle(): Promise<void> {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  }

  /** The ids of a body (one call or a batch) with their methods. */
  static calls(body: string): { id: number; method: string; params?: unknown }[] {
    const v = JSON.parse(body) as unknown;
    return (Array.isArray(v) ? v : [v]) as { id: number; method: string; params?: unknown }[];
  }
}

export const UPSTREAM_OPTS: UpstreamOptions = {
  timeoutMs: 1_000,
  connections: 1,
  breakerThreshold: 3,
  breakerCooldownMs: 60_000,
};

/**
 * A real Upstream (its health state, breaker, capabilities) whose exchanges go to `wire` instead of the
 * network: no socket is ever opened (the URL is port 9 on loopback, never dialled).
 */
export function fakeUpstream(
  wire: Wire,
  r: Partial<UpstreamRecord> & { id: string },
  opts: UpstreamOptions = UPSTREAM_OPTS,
): Upstream {
  const u = new Upstream({ httpUrl: `http://127.0.0.1:9/${r.id}`, wsUrl: null, weight: 1, ...r }, opts);
  const exchange = <T>(
    body: string | Uint8Array,
    kind: ExchangeKind,
    check: ReplyCheck<T>,
    control?: ExchangeControl,
    traceparent?: string,
  ): Promise<ExchangeResult<T>> =>
    new Promise((resolve) => {
      let done = false;
      const s: Sent = {
        node: r.id,
        body: typeof body === "string" ? body : Buffer.from(body).toString("utf8"),
        kind,
        traceparent,
        cancelled: false,
        answer(text) {
          if (done) return;
          done = true;
          const v = check(new ReplyBody(Buffer.from(text)));
          resolve(v === INVALID_REPLY ? { ok: false, failure: "bad" } : { ok: true, value: v });
        },
        fail(failure) {
          if (done) return;
          done = true;
          resolve({ ok: false, failure });
        },
      };
      if (control !== undefined) {
        control.exchange = {
          cancel() {
            s.cancelled = true;
            s.fail("cancelled");
          },
        };
      }
      wire.sent.push(s);
      wire.auto?.(s);
    });
  Object.assign(u, { exchange });
  return u;
}

/** A network record with upstreams u0, u1, ... (each partial record merged in). */
export function record(ups: Partial<UpstreamRecord>[], slug = "eth"): NetworkRecord {
  return {
    slug,
    name: slug,
    protocol: "EVM",
    chainId: 1,
    allowDebug: true,
    upstreams: ups.map((u, i) => ({
      id: `u${i}`,
      httpUrl: `http://127.0.0.1:9/${i}`,
      wsUrl: null,
      weight: 1,
      ...u,
    })),
  } as NetworkRecord;
}

/** Every metric call the pool made, as `name:args` strings. */
export class RecordingMetrics extends NoopMetrics {
  readonly calls: string[] = [];
  override upstreamRequest(_n: string, upstream: string, outcome: string): void {
    this.calls.push(`request:${upstream}:${outcome}`);
  }
  override upstreamHedge(_n: string, outcome: string): void {
    this.calls.push(`hedge:${outcome}`);
  }
  override upstreamEmptyRetry(_n: string, outcome: string): void {
    this.calls.push(`emptyRetry:${outcome}`);
  }
  override upstreamOverBudget(_n: string, upstream: string, requests: number): void {
    this.calls.push(`overBudget:${upstream}:${requests}`);
  }
  override capabilityRouting(_n: string, need: string, outcome: string): void {
    this.calls.push(`capability:${need}:${outcome}`);
  }
  override upstreamHealth(...args: unknown[]): void {
    const [, upstream, healthy, head] = args;
    this.calls.push(`health:${upstream}:${healthy}:${head}`);
  }
  override logsSplit(_n: string, subCalls: number, halvings: number): void {
    this.calls.push(`logsSplit:${subCalls}:${halvings}`);
  }
  of(prefix: string): string[] {
    return this.calls.filter((c) => c.startsWith(prefix));
  }
}

/**
 * The parts every pool module stands on (membership, heads, selection, metric hooks) over fake nodes,
 * with a fake clock. Heads are set by hand, as health checks would.
 */
export function base(
  ups: Partial<UpstreamRecord>[],
  opts: { maxLagBlocks?: number; random?: () => number } = {},
) {
  const wire = new Wire();
  const clock = new FakePoolClock();
  const metrics = new RecordingMetrics();
  const hooks = new PoolMetricHooks(metrics, () => "eth");
  const members = new PoolMembership(UPSTREAM_OPTS, hooks.upstreamEvents, (r) => fakeUpstream(wire, r));
  members.update(record(ups));
  const heads = new HeadTracker(members, 1000);
  const selector = new Selector(members, heads, { maxLagBlocks: opts.maxLagBlocks ?? 5 }, clock, opts.random);
  const u = members.upstreams;
  return { wire, clock, metrics, hooks, members, heads, selector, u };
}

/**
 * Every part of a pool but its front class, wired as NetworkPool wires them, over fake nodes with a fake
 * clock. `hedge`: hedged reads on with these options.
 */
export function wired(
  ups: Partial<UpstreamRecord>[],
  opts: { maxAttempts?: number; hedge?: HedgeOptions; random?: () => number } = {},
) {
  const b = base(ups, { random: opts.random });
  const probed: string[] = [];
  const health = new PoolHealth(b.members, b.selector, b.heads, undefined, b.hooks, b.clock, () => false);
  const book = new ExchangeBook(b.hooks, b.clock, (u) => {
    probed.push(u.id);
    return health.probe(u);
  });
  const hedger =
    opts.hedge === undefined
      ? undefined
      : new Hedger(opts.hedge, b.members, b.selector, book, b.hooks, b.clock);
  const failover = new Failover(
    { maxAttempts: opts.maxAttempts ?? 3 },
    b.members,
    b.selector,
    book,
    hedger,
    b.hooks,
    b.clock,
  );
  const ids = new IdSequence();
  const emptyRetry = new EmptyRetry(b.members, b.selector, b.heads, book, ids, b.hooks, b.clock);
  const exchanges = new PoolExchanges(failover, emptyRetry, book, ids, b.clock);
  return { ...b, probed, health, book, hedger, failover, emptyRetry, exchanges };
}

/** Opens `u`'s breaker as failures would, its cooldown running until 60 s after the clock's now. */
export function openBreaker(u: Upstream): void {
  for (let i = 0; i < UPSTREAM_OPTS.breakerThreshold; i++) u.recordFailure("unreachable");
}

/** A node's answer to the single call in `s` (its id echoed). */
export function answerResult(s: Sent, result: string): void {
  const [c] = Wire.calls(s.body);
  s.answer(`{"jsonrpc":"2.0","id":${c!.id},"result":${result}}`);
}
