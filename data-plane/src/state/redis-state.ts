import { EventEmitter } from "node:events";
import type { Logger } from "../../../shared/src/log/logger";
import {
  createRedis,
  isCluster,
  type RedisClient,
  type RedisNodeAddress,
} from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import {
  type KeyRecord,
  KeyRecordSchema,
  type NetworkRecord,
  NetworkRecordSchema,
  type PlaneEvent,
  PlaneEventSchema,
} from "../../../shared/src/redis/records";

/** Where the data plane reads what the control plane publishes. */
export interface PlaneState {
  /** Reads one key record; `null` when absent or malformed. Rejects when the store is unreachable. */
  getKey(keyHash: string): Promise<KeyRecord | null>;
  /** Reads every network record (malformed ones are skipped and logged). */
  getNetworks(): Promise<NetworkRecord[]>;
  /**
   * Reads the network records and the publication marker (`RedisNames.publishedAt`, null when absent =
   * nothing was fully published into this Redis yet, or it lost its data). The marker is read before and
   * after the networks and only a matching pair is returned (a re-publish between the reads is read
   * again), so the networks always belong to the marker returned. Rejects when Redis is unreachable.
   */
  getPublishedNetworks(): Promise<{ marker: string | null; networks: NetworkRecord[] }>;
  /**
   * Events from the control plane, and `reconnect` after a connection was lost, once BOTH connections are
   * back, the events subscription is live again and the marker was read after it (`null` = absent): a
   * `resync` published while the subscriber was away shows as a changed marker.
   */
  on(event: "event", listener: (e: PlaneEvent) => void): this;
  on(event: "reconnect", listener: (marker: string | null) => void): this;
  /** True once the events subscription is active. */
  readonly subscribed: boolean;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface RedisStateOptions {
  url: string;
  /** REDIS_CLUSTER_NODES: set = a Redis Cluster (`url` then gives only credentials and TLS). */
  clusterNodes?: readonly RedisNodeAddress[];
  prefix: string;
  commandTimeoutMs: number;
  logger: Logger;
  /** Wait before reading the marker again when the read after a reconnect failed, ms (default 250). */
  syncRetryMs?: number;
}

/** Attempts at reading networks and marker as a consistent pair before giving up (a re-publish storm). */
const CONSISTENT_READ_ATTEMPTS = 5;

/** Redis-backed state: one command connection and one subscriber connection. */
export class RedisPlaneState extends EventEmitter implements PlaneState {
  readonly names: RedisNames;
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly logger: Logger;
  private _subscribed = false;
  /** A connection closed since the last `reconnect` was emitted (or since start). */
  private lostConnection = false;
  private started = false;
  private closing = false;
  private syncing = false;
  private syncRetry: NodeJS.Timeout | undefined;
  private readonly syncRetryMs: number;

  constructor(opts: RedisStateOptions) {
    super();
    this.names = new RedisNames(opts.prefix);
    this.logger = opts.logger;
    this.syncRetryMs = opts.syncRetryMs ?? 250;
    const target = { url: opts.url, clusterNodes: opts.clusterNodes };
    // Named so an operator (or a test) can find this instance's connections in CLIENT LIST.
    this.cmd = createRedis(target, "dp-commands", {
      commandTimeoutMs: opts.commandTimeoutMs,
      name: `data-plane:${opts.prefix}cmd`,
    });
    // On a Redis Cluster the subscription sits on one node; PUBLISH on any node reaches it.
    this.sub = createRedis(target, "dp-events", { name: `data-plane:${opts.prefix}sub` });
    this.cmd.on("error", (err) => this.logger.warn({ err: err.message }, "redis command connection error"));
    this.sub.on("error", (err) => this.logger.warn({ err: err.message }, "redis subscriber error"));
    // The two connections back off independently, and ioredis emits "ready" on the subscriber before its
    // re-subscribe is done: state is re-synced only once the command connection is ready AND the
    // subscription is live again (see `resync`), whichever comes back last.
    for (const conn of [this.cmd, this.sub]) {
      conn.on("close", () => {
        this.lostConnection = true;
        if (conn === this.sub) this._subscribed = false;
      });
    }
    this.cmd.on("ready", () => this.resync());
    this.sub.on("message", (channel: string, message: string) => {
      if (channel !== this.names.eventsChannel()) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch {
        this.logger.warn({ message: message.slice(0, 200) }, "ignoring non-JSON plane event");
        return;
      }
      const ev = PlaneEventSchema.safeParse(parsed);
      if (!ev.success) {
        this.logger.warn({ message: message.slice(0, 200) }, "ignoring malformed plane event");
        return;
      }
      this.emit("event", ev.data);
    });
    // On a Redis Cluster the subscription sits on one node, and ioredis moves it to another by itself,
    // with no "close": when its connection ends, or when its node leaves the slot map (a master that
    // stopped answering keeps its connections open, and holds the subscription until the next slot-map
    // refresh drops it). Events published meanwhile are lost, so a node leaving counts as a lost
    // connection: once the subscription answers again, state is re-synced (cached keys dropped).
    if (isCluster(this.sub)) {
      this.sub.on("-node", () => {
        if (!this.started || this.closing) return;
        this.lostConnection = true;
        // After this emit: ioredis picks the new subscriber in a "-node" listener of its own.
        setImmediate(() => {
          if (this.closing) return;
          this.sub.subscribe(this.names.eventsChannel()).then(
            () => this.resync(),
            (err: Error) => this.logger.warn({ err: err.message }, "re-subscribe failed"),
          );
        });
      });
    }
    // ioredis re-subscribes by itself after a reconnect, without an event saying so: subscribe again
    // (idempotent; queued behind ioredis's own SUBSCRIBE) to know when the subscription is live.
    this.sub.on("ready", () => {
      if (this._subscribed || !this.started || this.closing) return;
      this.sub.subscribe(this.names.eventsChannel()).then(
        () => {
          this._subscribed = true;
          this.resync();
        },
        (err: Error) => this.logger.warn({ err: err.message }, "re-subscribe failed"),
      );
    });
  }

  /**
   * After a lost connection, once both are usable again: reads the marker (after the subscription is
   * live, so a re-publish is either seen in the marker or announced to us) and emits `reconnect` with it.
   * A failed read emits nothing (the caller keeps its caches) and is retried every `syncRetryMs`.
   */
  private resync(): void {
    if (!this.started || this.closing || !this.lostConnection || this.syncing) return;
    if (this.cmd.status !== "ready" || !this._subscribed) return;
    if (this.syncRetry !== undefined) {
      clearTimeout(this.syncRetry);
      this.syncRetry = undefined;
    }
    this.syncing = true;
    this.lostConnection = false;
    this.readMarker().then(
      (marker) => {
        this.syncing = false;
        if (this.closing) return;
        this.logger.info({ published: marker !== null }, "redis reconnected: re-syncing cached state");
        this.emit("reconnect", marker);
        // Lost again while reading (a "ready" then was ignored): sync once more.
        this.resync();
      },
      (err: Error) => {
        this.syncing = false;
        if (this.closing) return;
        this.lostConnection = true;
        this.logger.warn(
          { err: err.message },
          "could not read the publication marker after a reconnect; retrying",
        );
        this.syncRetry = setTimeout(() => {
          this.syncRetry = undefined;
          this.resync();
        }, this.syncRetryMs);
        this.syncRetry.unref();
      },
    );
  }

  get subscribed(): boolean {
    return this._subscribed;
  }

  async start(): Promise<void> {
    await Promise.all([this.cmd.connect(), this.sub.connect()]);
    await this.sub.subscribe(this.names.eventsChannel());
    this._subscribed = true;
    this.started = true;
    this.lostConnection = false;
  }

  async getKey(keyHash: string): Promise<KeyRecord | null> {
    const raw = await this.cmd.get(this.names.apiKey(keyHash));
    if (raw === null) return null;
    try {
      const parsed = KeyRecordSchema.safeParse(JSON.parse(raw));
      if (parsed.success) return parsed.data;
    } catch {
      // fall through
    }
    this.logger.warn({ keyHash: keyHash.slice(0, 8) }, "malformed key record in redis; treating as unknown");
    return null;
  }

  async getNetworks(): Promise<NetworkRecord[]> {
    return this.parseNetworks(await this.cmd.hgetall(this.names.networks()));
  }

  async getPublishedNetworks(): Promise<{ marker: string | null; networks: NetworkRecord[] }> {
    // Separate commands, not a MULTI: the keys may be in different Redis Cluster slots. The marker is read
    // on both sides of the networks: every full re-publish writes a new marker with the networks (same
    // MULTI on a single Redis; after them on a cluster), so equal values mean the networks were not
    // replaced in between (an emptied Redis shows as null on both sides or as a mismatch).
    let before = await this.readMarker();
    for (let attempt = 1; ; attempt++) {
      const networks = this.parseNetworks(await this.cmd.hgetall(this.names.networks()));
      const after = await this.readMarker();
      if (after === before) return { marker: after, networks };
      if (attempt >= CONSISTENT_READ_ATTEMPTS) {
        throw new Error("the publication changed during every read of the networks");
      }
      before = after;
    }
  }

  private readMarker(): Promise<string | null> {
    return this.cmd.get(this.names.publishedAt());
  }

  private parseNetworks(all: Record<string, string>): NetworkRecord[] {
    const out: NetworkRecord[] = [];
    for (const [slug, raw] of Object.entries(all)) {
      try {
        const parsed = NetworkRecordSchema.safeParse(JSON.parse(raw));
        if (parsed.success) {
          out.push(parsed.data);
          continue;
        }
      } catch {
        // fall through
      }
      this.logger.warn({ slug }, "malformed network record in redis; skipped");
    }
    return out;
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.syncRetry !== undefined) clearTimeout(this.syncRetry);
    this._subscribed = false;
    this.removeAllListeners("reconnect");
    await Promise.allSettled([this.sub.quit(), this.cmd.quit()]);
    this.sub.disconnect();
    this.cmd.disconnect();
  }
}
