import { hash as oneShotHash } from "node:crypto";
import { malformedApiKey } from "../../../shared/src/crypto/api-key";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { KeyRecord, PlaneEvent } from "../../../shared/src/redis/records";
import type { CompiledAccess } from "../access/access-rules";
import type { CompiledAllowlist } from "../allowlist/allowlist";
import type { Flight } from "../limits/concurrency";
import { InFlightMap } from "../memory/in-flight-map";
import { type Clock, systemClock } from "../ratelimit/clock";
import type { PlaneState } from "../state/redis-state";
import { compactKeyRecord } from "./compact";
import type { KeyLookupThrottle } from "./lookup-throttle";
import { BUMP_INTERVAL_MS, TtlLru } from "./ttl-lru";

/** A verified key: its record plus what the hot path derives from it once. */
export interface VerifiedKey {
  readonly hash: string;
  readonly record: KeyRecord;
  readonly allowlist: CompiledAllowlist;
  /** The app's compiled access rules; undefined when it has none (and for node keys). */
  readonly access?: CompiledAccess;
  /** The rate limiter's identifier, memoized by `keyIdentifier` / `nodeIdentifier` (a string built per request would be hashed per request). */
  limitId?: string;
  /** Its tenant at the concurrency caps (the plan's caps), memoized at admission (pipeline/admit.ts). */
  flight?: Flight;
  /** The app's compute-unit cap identifier, memoized by `keyComputeIdentifier`. */
  computeLimitId?: string;
}

export type VerifiedOk = { ok: true; key: VerifiedKey };
/** A refusal; `retryAfterMs` with `key_lookup_throttled` (the Retry-After of the 429). */
export type VerifyResult = VerifiedOk | { ok: false; error: ErrorRow; retryAfterMs?: number };

/**
 * API-key verification. Returns synchronously on a cache hit (the common case) and a promise on a miss,
 * so the hot path does not pay for an await when it does not have to.
 */
export interface KeyVerifier {
  /**
   * `client`: the caller's address bucket (ipBucket), asked only when the key is not cached and would be
   * read from Redis: past KEY_LOOKUP_MAX_FAILURES unknown keys from it, the answer is
   * `key_lookup_throttled` without a Redis read. Without it (or with undefined) nothing is throttled.
   */
  verify(
    apiKey: string,
    nowMs: number,
    client?: () => string | undefined,
  ): VerifyResult | Promise<VerifyResult>;
  /** Applies a control-plane event (invalidations). */
  onEvent(event: PlaneEvent): void;
  /** Drops everything cached (the control plane's `resync`). */
  clear(): void;
  /**
   * After a lost Redis connection: every cached key is read again before its next use, but one whose
   * record cannot be read yet is still served as cached (see CachingKeyVerifier.revalidate).
   */
  revalidate(): void;
}

export interface CachingKeyVerifierOptions {
  state: PlaneState;
  ttlMs: number;
  negativeTtlMs: number;
  maxEntries: number;
  logger: Logger;
  /** Failed look-ups per client address (shared by the process's threads); none = not throttled. */
  throttle?: KeyLookupThrottle;
  /** The wall clock of the cache lifetimes: a fake one in tests, where expiry is the subject. */
  clock?: Clock;
}

/**
 * A cached verification: the key and the result served on a hit in one object (an entry is its own
 * `VerifiedOk`, so a cached key costs one object besides its record). Every field is set in the
 * constructor, so all entries share one hidden class and none grows a property array later.
 */
class CachedKey implements VerifiedOk, VerifiedKey {
  readonly ok = true as const;
  readonly key: VerifiedKey = this;
  limitId: string | undefined = undefined;
  flight: Flight | undefined = undefined;
  computeLimitId: string | undefined = undefined;

  constructor(
    readonly hash: string,
    readonly record: KeyRecord,
    readonly allowlist: CompiledAllowlist,
    readonly access: CompiledAccess | undefined,
    /** When the cache entry lapses (epoch ms). */
    readonly cachedUntilMs: number,
    /** When the LRU last moved it to the most recent end (epoch ms). */
    public bumpedAtMs: number,
  ) {}
}

const UNKNOWN: VerifyResult = { ok: false, error: GatewayError.UnknownKey };
const INTERNAL: VerifyResult = { ok: false, error: GatewayError.Internal };

/**
 * Presented keys remembered in front of the hash-keyed cache (never more than KEY_CACHE_MAX_ENTRIES).
 * Entries join when loaded or found by hash, and leave first in, first out.
 */
const FRONT_MAX = 4_096;

/**
 * In-process cache of key records by SHA-256 of the key (as Redis stores them), filled from Redis on a
 * miss. Unknown keys are remembered briefly (cleared at once by `key.upsert`); events and reconnects
 * invalidate.
 *
 * Hashing every presented key was a large share of a cache hit's CPU (a one-shot SHA-256 and its digest
 * lookup per request; docs/benchmarks.md), so the most recently used keys are also found by the presented key itself in
 * `front`, a small map in front of the hash-keyed cache: traffic concentrates on few keys, and 100,000
 * cached keys still cost no presented-key copy each. A lookup's time does not depend on how much of the
 * presented key matches a cached one: the Map hashes the whole presented string with V8's per-process
 * random seed and compares characters only with an entry whose 32-bit hash is equal. Invalidations
 * remove matching front entries by scanning it (at most FRONT_MAX). The front holds the presented keys
 * themselves (at most FRONT_MAX, each until first-in-first-out eviction or invalidation): a heap dump of
 * a data plane shows recently used keys, where the hash-keyed cache alone holds only their SHA-256.
 */
export class CachingKeyVerifier implements KeyVerifier {
  /** SHA-256 (hex) of the key -> its cached verification. */
  private readonly positive: TtlLru<CachedKey>;
  /**
   * Presented key -> an entry of `positive`, or one `positive` evicted (served until `cachedUntilMs`,
   * checked on every read).
   */
  private readonly front = new Map<string, CachedKey>();
  private readonly frontMax: number;
  /** Unknown key hashes -> until when they are answered as unknown (epoch ms). */
  private readonly negative: TtlLru<number> | undefined;
  private readonly pending = new InFlightMap<string, Promise<VerifyResult>>();
  /** Bumped by every invalidation; a Redis read that started before one does not fill the cache. */
  private generation = 0;
  /**
   * Keys `revalidate` dropped, by hash: the answer when their first read fails (Redis still unreadable
   * for them), each until its cache entry would have lapsed; all gone by `staleUntilMs`.
   */
  private readonly stale = new Map<string, CachedKey>();
  private staleUntilMs = 0;
  private readonly clock: Clock;

  constructor(private readonly opts: CachingKeyVerifierOptions) {
    this.clock = opts.clock ?? systemClock;
    this.frontMax = Math.min(FRONT_MAX, opts.maxEntries);
    this.positive = new TtlLru(opts.maxEntries, (e) => e.cachedUntilMs, {
      at: (e) => e.bumpedAtMs,
      set: (e, nowMs) => {
        e.bumpedAtMs = nowMs;
      },
    });
    this.negative =
      opts.negativeTtlMs > 0 ? new TtlLru(Math.min(opts.maxEntries, 100_000), (until) => until) : undefined;
  }

  verify(
    apiKey: string,
    nowMs: number,
    client?: () => string | undefined,
  ): VerifyResult | Promise<VerifyResult> {
    // Cache lifetimes run on the wall clock, not on `nowMs` (the key's own expiry is checked against that).
    const wallMs = this.clock.now();
    const known = this.front.get(apiKey);
    if (known !== undefined) {
      if (known.cachedUntilMs > wallMs) {
        // Keeps the entry's recency in the hash-keyed LRU (at most once per BUMP_INTERVAL_MS, as its hits
        // there do); puts it back if that LRU evicted it meanwhile.
        if (
          wallMs - known.bumpedAtMs >= BUMP_INTERVAL_MS &&
          this.positive.get(known.hash, wallMs) === undefined
        ) {
          this.positive.set(known.hash, known);
        }
        return checkExpiry(known, nowMs);
      }
      this.front.delete(apiKey);
    }
    // A key claiming our prefixed format with a wrong checksum was never issued: refused without a
    // hash, a cache entry or a Redis read, so a flood of made-up keys costs Redis nothing.
    if (malformedApiKey(apiKey)) return UNKNOWN;
    const hash = oneShotHash("sha256", apiKey, "hex");
    const hit = this.positive.get(hash, wallMs);
    if (hit !== undefined) {
      this.remember(apiKey, hit);
      return checkExpiry(hit, nowMs);
    }
    if (this.negative?.has(hash, wallMs)) return UNKNOWN;
    let p = this.pending.get(hash);
    if (p === undefined) {
      // A Redis read is next: an address that presented too many unknown keys is refused before it.
      const throttle = this.opts.throttle;
      const address = throttle?.enabled && client !== undefined ? client() : undefined;
      if (address !== undefined) {
        const waitMs = throttle!.blockedForMs(address);
        if (waitMs > 0) return { ok: false, error: GatewayError.KeyLookupThrottled, retryAfterMs: waitMs };
      }
      // Leaves `pending` when done unless an invalidation dropped it first (and a newer load took its place).
      const loading = this.load(apiKey, hash).then((r) => {
        if (address !== undefined && !r.ok && r.error === GatewayError.UnknownKey) throttle!.failed(address);
        if (this.pending.get(hash) === loading) this.pending.delete(hash);
        return r;
      });
      this.pending.set(hash, loading);
      p = loading;
    }
    return p.then((r) => (r.ok ? checkExpiry(r, nowMs) : r));
  }

  /** Cached keys (for tests and diagnostics). */
  get size(): number {
    return this.positive.size;
  }

  private remember(apiKey: string, entry: CachedKey): void {
    if (this.front.size >= this.frontMax) {
      const oldest = this.front.keys().next();
      if (!oldest.done) this.front.delete(oldest.value);
    }
    this.front.set(apiKey, entry);
  }

  private async load(apiKey: string, hash: string): Promise<VerifyResult> {
    const gen = this.generation;
    try {
      const record = await this.opts.state.getKey(hash);
      // Read: what Redis says now replaces what was kept (stale entries of another generation included).
      this.stale.delete(hash);
      if (record === null) {
        if (gen === this.generation) this.negative?.set(hash, this.clock.now() + this.opts.negativeTtlMs);
        return UNKNOWN;
      }
      const compact = compactKeyRecord(record);
      const now = this.clock.now();
      const entry = new CachedKey(
        hash,
        compact.record,
        compact.allowlist,
        compact.access,
        now + this.opts.ttlMs,
        now,
      );
      if (gen === this.generation) {
        this.positive.set(hash, entry);
        this.remember(apiKey, entry);
      }
      return entry;
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, "key lookup failed (redis unavailable)");
      const was = this.staleEntry(hash);
      return was ?? INTERNAL;
    }
  }

  /** The entry `revalidate` kept for `hash` while it is still within its cache lifetime. */
  private staleEntry(hash: string): CachedKey | undefined {
    if (this.stale.size === 0) return undefined;
    const now = this.clock.now();
    if (now >= this.staleUntilMs) {
      this.stale.clear();
      return undefined;
    }
    const e = this.stale.get(hash);
    return e !== undefined && e.cachedUntilMs > now ? e : undefined;
  }

  /** Drops the front entries `drop` selects. */
  private forget(drop: (entry: CachedKey) => boolean): void {
    for (const [apiKey, entry] of this.front) if (drop(entry)) this.front.delete(apiKey);
  }

  onEvent(event: PlaneEvent): void {
    switch (event.type) {
      case "key.upsert":
      case "key.revoke": {
        this.generation++;
        const hash = event.keyHash;
        this.positive.delete(hash);
        this.negative?.delete(hash);
        // A read already under way may return the old record: later requests start their own.
        this.pending.delete(hash);
        this.stale.delete(hash);
        this.forget((e) => e.hash === hash);
        break;
      }
      case "workspace.update": {
        this.generation++;
        const ws = event.workspaceId;
        for (const [hash, entry] of this.positive.entries()) {
          if (entry.record.workspaceId === ws) this.positive.delete(hash);
        }
        this.forget((e) => e.record.workspaceId === ws);
        for (const [hash, entry] of this.stale) if (entry.record.workspaceId === ws) this.stale.delete(hash);
        this.pending.clear(); // which reads are for this workspace is not known until they answer
        break;
      }
      case "resync":
        this.clear();
        break;
      case "networks.update":
        break;
    }
  }

  clear(): void {
    this.stale.clear();
    this.drop();
  }

  /**
   * After a lost Redis connection, when events may have been missed: as `clear`, every key is read again
   * before its next use, so a key revoked meanwhile is refused as soon as its record can be read. But a
   * read that fails answers with the key as it was cached, until that entry would have lapsed, as a cached
   * key is served while Redis is away: on a Redis Cluster the connection can be back while the master
   * holding some keys' records is still failing over to its replica, and those keys were working.
   */
  revalidate(): void {
    const now = this.clock.now();
    const keep = (e: CachedKey) => {
      if (e.cachedUntilMs <= now) return;
      this.stale.set(e.hash, e);
      if (e.cachedUntilMs > this.staleUntilMs) this.staleUntilMs = e.cachedUntilMs;
    };
    for (const [, e] of this.positive.entries()) keep(e);
    for (const e of this.front.values()) keep(e);
    this.drop();
  }

  private drop(): void {
    this.generation++;
    this.positive.clear();
    this.front.clear();
    this.negative?.clear();
    this.pending.clear();
  }
}

function checkExpiry(entry: VerifiedOk, nowMs: number): VerifyResult {
  const exp = entry.key.record.expiresAtMs;
  if (exp !== null && exp <= nowMs) return UNKNOWN;
  return entry;
}
