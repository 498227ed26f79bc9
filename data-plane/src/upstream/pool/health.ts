import type { UpstreamHealth } from "../../../../shared/src/redis/records";
import { familyList } from "../capabilities";
import type { ChainWatch } from "../chain-watch";
import { evmAsk, findOldestState, substrateAsk } from "../state-probe";
import { ExchangeKind, INVALID_REPLY, type Upstream } from "../upstream";
import type { PoolClock } from "./clock";
import type { HeadTracker } from "./head-tracker";
import type { PoolMembership } from "./membership";
import type { PoolMetricHooks } from "./metric-hooks";
import type { Selector } from "./selector";
import { isRateLimitReply, RATE_LIMITED } from "./wire";

export const EVM_PROBE = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
export const SUBSTRATE_PROBE = '{"jsonrpc":"2.0","id":1,"method":"chain_getHeader","params":[]}';

/** The head height in a probe's answer (eth_blockNumber, or chain_getHeader's `number`), if it holds one. */
export function parseHead(text: string, substrate: boolean): number | undefined {
  try {
    const v = JSON.parse(text) as { result?: unknown };
    const hex = substrate ? (v.result as { number?: unknown } | null)?.number : v.result;
    if (typeof hex !== "string" || !hex.startsWith("0x")) return undefined;
    const n = Number.parseInt(hex, 16);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** What NetworkPool.describe gives per upstream (diagnostics and tests). */
export interface UpstreamDescription {
  id: string;
  head: number;
  finalized: number;
  breakerOpen: boolean;
  latencyEwmaMs: number;
  inFlight: number;
  archiveMode: string;
  oldestStateBlock: number;
  methodFamilies: string[];
  maxRequestsPerSecond: number | null;
  overBudget: boolean;
}

/**
 * Health of a network's nodes: the health-check rounds (head height and latency; failures feed the
 * breaker), the probe after a client call timed out, the chain watch's finalized-head polls, the state
 * probes that find how old a state each node keeps, and the snapshots of all of it.
 */
export class PoolHealth {
  constructor(
    private readonly members: PoolMembership,
    private readonly selector: Selector,
    private readonly heads: HeadTracker,
    /** Finalized head and reorgs (undefined when CACHE_FINALITY_ENABLED is off). */
    private readonly chain: ChainWatch | undefined,
    private readonly hooks: PoolMetricHooks,
    private readonly clock: PoolClock,
    /** Whether the network is a Substrate chain (read per round: a networks update may change it). */
    private readonly substrate: () => boolean,
  ) {}

  /**
   * One health-check round over every upstream (head height, latency; failures feed the breaker), then,
   * with the chain watch on, each node that answered its probe is polled for its finalized head and head
   * hash, and the network's finalized head moves up when they agree on a higher one.
   */
  async check(): Promise<void> {
    const substrate = this.substrate();
    const body = substrate ? SUBSTRATE_PROBE : EVM_PROBE;
    const chain = this.chain;
    const ups = this.members.upstreams;
    if (chain === undefined) {
      await Promise.all(ups.map((u) => this.probe(u, body, substrate)));
      return;
    }
    // Polled only after a probe that got a head, so a hung node costs the round one probe timeout, as
    // before; a node that answers probes but hangs on these reads adds at most two more.
    await Promise.all(
      ups.map(async (u) => {
        if (await this.probe(u, body, substrate)) await chain.poll(u, substrate);
      }),
    );
    if (chain.settle(this.selector.live(), this.heads.best())) this.hooks.finalized(chain.finalized);
  }

  /**
   * One health probe of `u` (head height; every failure, timeouts included, counts toward its breaker),
   * unless one is running already. Also run at once when a client call to `u` timed out. True when it
   * got a head.
   */
  async probe(u: Upstream, body?: string, substrate = this.substrate()): Promise<boolean> {
    if (u.probeRunning) return false;
    // An open breaker is probed only once its cooldown has passed, a backed-off node once it has ended.
    if (!u.available(this.clock.now())) {
      this.report(u);
      return false;
    }
    // A node selection steers away from gets no samples: its window is retired by time here (see
    // LatencyWindow), so that it earns traffic back once its probes say it recovered.
    u.latency.expire(this.clock.monotonic());
    let gotHead = false;
    u.probeRunning = true;
    try {
      // Only a head or the node's rate-limit error is a valid answer; anything else settles as a failed
      // probe (one count toward the breaker, never a success first).
      const res = await u.exchange(
        body ?? (substrate ? SUBSTRATE_PROBE : EVM_PROBE),
        ExchangeKind.Probe,
        (reply): number | typeof RATE_LIMITED | typeof INVALID_REPLY => {
          const head = parseHead(reply.text, substrate);
          if (head !== undefined) return head;
          return isRateLimitReply(reply.text) ? RATE_LIMITED : INVALID_REPLY;
        },
      );
      if (res.ok) {
        if (res.value === RATE_LIMITED) u.backOff(undefined);
        else {
          u.head = res.value;
          gotHead = true;
        }
      }
    } finally {
      u.probeRunning = false;
    }
    this.report(u);
    return gotHead;
  }

  /** Writes `u`'s health series (metric hooks: upstream health, oldest state). */
  private report(u: Upstream): void {
    const healthy = this.selector.selectable(u, this.clock.now(), this.heads.best());
    this.hooks.health(u.id, healthy, u.head, u.latencyEwmaMs);
    this.hooks.oldestState(u.id, u.caps.oldestServed(u.head));
  }

  /**
   * One state-probe round (UPSTREAM_STATE_PROBE_INTERVAL_MS): finds, for every upstream not declared
   * ARCHIVE, the oldest block whose state it serves (state-probe.ts). `onlyUnknown`: just the ones not
   * probed yet (new upstreams, a record change), as after every networks update. Never throws.
   */
  async probeStates(onlyUnknown = false): Promise<void> {
    const substrate = this.substrate();
    await Promise.all(this.members.upstreams.map((u) => this.probeState(u, substrate, onlyUnknown)));
  }

  private async probeState(u: Upstream, substrate: boolean, onlyUnknown: boolean): Promise<void> {
    const caps = u.caps;
    if (!caps.wantsProbe || caps.probeRunning || (onlyUnknown && caps.probedOldest >= 0)) return;
    // Needs the node's head (from a health check), and a node the breaker lets calls through to.
    const head = u.head;
    if (head < 1 || u.breakerOpen || !u.available(this.clock.now())) return;
    caps.probeRunning = true;
    try {
      const guess = caps.estimatedOldest(head);
      const oldest = await findOldestState(
        head,
        substrate ? substrateAsk(u) : evmAsk(u),
        guess > 0 ? guess : undefined,
      );
      if (oldest !== undefined && this.members.has(u)) caps.recordProbe(oldest, head);
    } finally {
      caps.probeRunning = false;
    }
    this.hooks.oldestState(u.id, caps.oldestServed(u.head));
  }

  /**
   * Snapshot for diagnostics and tests. `oldestStateBlock`: what calls are routed by (-1 = unknown);
   * `finalized`: the node's finalized head (-1 = none or watch off).
   */
  describe(): UpstreamDescription[] {
    const now = this.clock.now();
    return this.members.upstreams.map((u) => ({
      id: u.id,
      head: u.head,
      finalized: this.chain?.nodeFinalized(u) ?? -1,
      breakerOpen: u.breakerOpen,
      latencyEwmaMs: u.latencyEwmaMs,
      inFlight: u.inFlight,
      archiveMode: u.caps.archiveMode,
      oldestStateBlock: u.caps.oldestServed(u.head),
      methodFamilies: familyList(u.caps.families),
      maxRequestsPerSecond: u.caps.maxRequestsPerSecond === 0 ? null : u.caps.maxRequestsPerSecond,
      overBudget: u.caps.overBudget(now),
    }));
  }

  /** What the health publisher writes for this network (health-publisher.ts, HealthRecord). */
  snapshot(): { head: number; upstreams: UpstreamHealth[] } {
    const now = this.clock.now();
    const best = this.heads.best();
    return {
      head: best,
      upstreams: this.members.upstreams.map((u) => ({
        id: u.id,
        healthy: this.selector.selectable(u, now, best),
        head: u.head,
        lagBlocks: u.head < 0 || best < 0 ? null : Math.max(0, best - u.head),
        latencyEwmaMs: Math.round(u.latencyEwmaMs * 1000) / 1000,
        errorRate: Math.round(u.errorRateEwma * 10_000) / 10_000,
        breakerOpen: u.breakerOpen,
      })),
    };
  }
}
