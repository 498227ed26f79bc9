import { EventEmitter } from "node:events";
import { Redis } from "ioredis";
import type { Logger } from "../../../shared/src/log/logger";
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
   * Reads the network records, then whether the publication marker (`RedisNames.publishedAt`) is
   * present. Absent = nothing was fully published into this Redis yet, or it lost its data.
   */
  getPublishedNetworks(): Promise<{ published: boolean; networks: NetworkRecord[] }>;
  /** Whether the publication marker is present. */
  isPublished(): Promise<boolean>;
  /** Events from the control plane (and `reconnect` when cached state may be stale). */
  on(event: "event", listener: (e: PlaneEvent) => void): this;
  on(event: "reconnect", listener: () => void): this;
  /** True once the events subscription is active. */
  readonly subscribed: boolean;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface RedisStateOptions {
  url: string;
  prefix: string;
  commandTimeoutMs: number;
  logger: Logger;
}

/** Redis-backed state: one command connection and one subscriber connection. */
export class RedisPlaneState extends EventEmitter implements PlaneState {
  readonly names: RedisNames;
  private readonly cmd: Redis;
  private readonly sub: Redis;
  private readonly logger: Logger;
  private _subscribed = false;
  private lostConnection = false;
  private started = false;

  constructor(opts: RedisStateOptions) {
    super();
    this.names = new RedisNames(opts.prefix);
    this.logger = opts.logger;
    const common = {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      retryStrategy: (times: number) => Math.min(50 * times, 1000),
    };
    // Named so an operator (or a test) can find this instance's connections in CLIENT LIST.
    this.cmd = new Redis(opts.url, {
      ...common,
      commandTimeout: opts.commandTimeoutMs,
      connectionName: `data-plane:${opts.prefix}cmd`,
    });
    this.sub = new Redis(opts.url, { ...common, connectionName: `data-plane:${opts.prefix}sub` });
    this.cmd.on("error", (err) => this.logger.warn({ err: err.message }, "redis command connection error"));
    this.sub.on("error", (err) => this.logger.warn({ err: err.message }, "redis subscriber error"));
    for (const conn of [this.cmd, this.sub]) {
      conn.on("close", () => {
        this.lostConnection = true;
        if (conn === this.sub) this._subscribed = false;
      });
      conn.on("ready", () => {
        if (!this.lostConnection) return;
        this.lostConnection = false;
        this.logger.info("redis reconnected: dropping cached state");
        this.emit("reconnect");
      });
    }
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
    // ioredis re-subscribes by itself after a reconnect, without an event saying so: subscribe again
    // (idempotent) to know when the subscription is live.
    this.sub.on("ready", () => {
      if (this._subscribed || !this.started) return;
      this.sub.subscribe(this.names.eventsChannel()).then(
        () => {
          this._subscribed = true;
        },
        (err: Error) => this.logger.warn({ err: err.message }, "re-subscribe failed"),
      );
    });
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

  async getPublishedNetworks(): Promise<{ published: boolean; networks: NetworkRecord[] }> {
    // Two commands, not a MULTI: the keys are in different Redis Cluster slots. Networks first: a Redis
    // emptied between the two reads shows as "not published" (kept state), and one re-published between
    // them is followed by a `resync` that reloads.
    const networks = this.parseNetworks(await this.cmd.hgetall(this.names.networks()));
    return { published: await this.isPublished(), networks };
  }

  async isPublished(): Promise<boolean> {
    return (await this.cmd.exists(this.names.publishedAt())) === 1;
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
    this._subscribed = false;
    this.removeAllListeners("reconnect");
    await Promise.allSettled([this.sub.quit(), this.cmd.quit()]);
    this.sub.disconnect();
    this.cmd.disconnect();
  }
}
