import { Counter, Gauge } from "prom-client";
import type { Metrics } from "../metrics/metrics";
import { PromMetrics } from "../metrics/metrics";
import type { SubscriptionHubs } from "./hub";
import type { WsSessions } from "./sessions";

/** What the WebSocket metrics read at scrape time. */
export interface WsMetricsView {
  readonly sessions: WsSessions;
  readonly hubs: SubscriptionHubs;
  readonly capRefusals: ReadonlyMap<string, number>;
  clientSubscriptionCount(): number;
}

/** The WebSocket series (connections, subscriptions, fan-out, notifications, cap refusals, closes). */
export function registerWsMetrics(m: Metrics, view: WsMetricsView): void {
  if (!(m instanceof PromMetrics)) return;
  const registers = [m.registry];
  new Gauge({
    name: "rpcgw_ws_connections",
    help: "Open client WebSocket connections",
    registers,
    collect() {
      this.set(view.sessions.all.size);
    },
  });
  new Gauge({
    name: "rpcgw_ws_upstream_subscriptions",
    help: "Upstream subscriptions (merged: one per distinct method + params per network)",
    labelNames: ["network"],
    registers,
    collect() {
      this.reset();
      for (const h of view.hubs.all()) this.set({ network: h.slug }, h.upstreamSubscriptions());
    },
  });
  new Gauge({
    name: "rpcgw_ws_client_subscriptions",
    help: "Client subscriptions (fanned out from upstream subscriptions)",
    registers,
    collect() {
      this.set(view.clientSubscriptionCount());
    },
  });
  new Counter({
    name: "rpcgw_ws_fanout_seconds_total",
    help: "Time spent fanning upstream notifications out to clients, until uWS has written the published messages",
    registers,
    collect() {
      this.reset();
      let t = 0;
      for (const h of view.hubs.all()) t += h.fanoutSeconds;
      this.inc(t);
    },
  });
  new Counter({
    name: "rpcgw_ws_fanouts_total",
    help: "Upstream notifications fanned out (each to every subscribed client)",
    registers,
    collect() {
      this.reset();
      let n = 0;
      for (const h of view.hubs.all()) n += h.fanouts;
      this.inc(n);
    },
  });
  new Counter({
    name: "rpcgw_ws_heads_dropped_total",
    help: "New-heads notifications not sent to subscribers: below, or the same as, the highest head already sent",
    registers,
    collect() {
      this.reset();
      let n = 0;
      for (const h of view.hubs.all()) n += h.headsDropped;
      this.inc(n);
    },
  });
  new Gauge({
    name: "rpcgw_ws_fanout_max_seconds",
    help: "Longest single fan-out since start",
    registers,
    aggregator: "max",
    collect() {
      let m = 0;
      for (const h of view.hubs.all()) m = Math.max(m, h.fanoutMaxSeconds);
      this.set(m);
    },
  });
  new Counter({
    name: "rpcgw_ws_notifications_total",
    help: "Subscription notifications delivered to clients",
    registers,
    collect() {
      this.reset();
      this.inc(view.sessions.notifications);
    },
  });
  new Counter({
    name: "rpcgw_ws_cap_refusals_total",
    help: "WebSocket upgrades refused by the connection caps and subscribes refused by the upstream-subscription budget, by reason",
    labelNames: ["reason"],
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of view.capRefusals) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: "rpcgw_ws_closed_total",
    help: "Client WebSockets closed by the gateway, by reason",
    labelNames: ["reason"],
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of view.sessions.closedBy) this.inc({ reason }, n);
    },
  });
}
