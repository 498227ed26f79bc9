import { hash as oneShotHash } from "node:crypto";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import type { KeyRecord, PlaneEvent } from "../../../shared/src/redis/records";
import type { CompiledAllowlist } from "../allowlist/allowlist";
import type { PlaneState } from "../state/redis-state";
import { compactKeyRecord } from "./compact";
import { TtlLru } from "./ttl-lru";

/** A verified key: its record plus what the hot path derives from it once. */
export interface VerifiedKey {
  readonly hash: string;
  readonly record: KeyRecord;
  readonly allowlist: CompiledAllowlist;
  /** The rate limiter's identifier, memoized by `keyIdentifier` / `nodeIdentifier` (a string built per request would be hashed per request). */
  limitId?: string;
}

export type VerifiedOk = { ok: true; key: VerifiedKey };
export type VerifyResult = VerifiedOk | { ok: false; error: ErrorRow };

/**
 * API-key verification. Returns synchronously on a cache hit (the common case) and a promise on a miss,
 * so the hot path does not pay for an await when it does not have to.
 */
export interface KeyVerifier {
  verify(apiKey: string, nowMs: number): VerifyResult | Promise<VerifyResult>;
  /** Applies a control-plane event (invalidations). */
  onEvent(event: PlaneEvent): void;
  /** Drops everything cached (Redis reconnect, resync). */
  clear(): void;
}

export interface CachingKeyVerifierOptions {
  state: PlaneState;
  ttlMs: number;
  negativeTtlMs: number;
  maxEntries: number;
  logger: Logger;
}

/** A cached verification: the result served on a hit, plus when the cache entry lapses (epoch ms). */
interface CachedOk extends VerifiedOk {
  readonly cachedUntilMs: number;
  /** When the LRU last moved it to the most recent end (epoch ms). */
  bumpedAtMs: number;
}

const UNKNOWN: VerifyResult = { ok: false, error: GatewayError.UnknownKey };
const INTERNAL: VerifyResult = { ok: false, error: GatewayError.Internal };

/**
 * In-process cache of key records by SHA-256 of the key, filled from Redis on a miss. Lookups go by hash,
 * so the time taken never depends on how much of a presented key matches a real one. Unknown keys are
 * remembered briefly (cleared at once by `key.upsert`); events and reconnects invalidate.
 */
export class CachingKeyVerifier implements KeyVerifier {
  private readonly positive: TtlLru<CachedOk>;
  /** Unknown key hashes -> until when they are answered as unknown (epoch ms). */
  private readonly negative: TtlLru<number> | undefined;
  private readonly pending = new Map<string, Promise<VerifyResult>>();
  /** Bumped by every invalidation; a Redis read that started before one does not fill the cache. */
  private generation = 0;

  constructor(private readonly opts: CachingKeyVerifierOptions) {
    this.positive = new TtlLru(opts.maxEntries, (e) => e.cachedUntilMs, {
      at: (e) => e.bumpedAtMs,
      set: (e, nowMs) => {
        e.bumpedAtMs = nowMs;
      },
    });
    this.negative =
      opts.negativeTtlMs > 0 ? new TtlLru(Math.min(opts.maxEntries, 100_000), (until) => until) : undefined;
  }

  verify(apiKey: string, nowMs: number): VerifyResult | Promise<VerifyResult> {
    const hash = oneShotHash("sha256", apiKey, "hex");
    // Cache lifetimes run on the wall clock, not on `nowMs` (the key's own expiry is checked against that).
    const clock = Date.now();
    const hit = this.positive.get(hash, clock);
    if (hit !== undefined) return checkExpiry(hit, nowMs);
    if (this.negative?.has(hash, clock)) return UNKNOWN;
    let p = this.pending.get(hash);
    if (p === undefined) {
      p = this.load(hash);
      this.pending.set(hash, p);
    }
    return p.then((r) => (r.ok ? checkExpiry(r, Date.now()) : r));
  }

  private async load(hash: string): Promise<VerifyResult> {
    const gen = this.generation;
    try {
      const record = await this.opts.state.getKey(hash);
      if (record === null) {
        if (gen === this.generation) this.negative?.set(hash, Date.now() + this.opts.negativeTtlMs);
        return UNKNOWN;
      }
      const compact = compactKeyRecord(record);
      const now = Date.now();
      const ok: CachedOk = {
        ok: true,
        key: { hash, record: compact.record, allowlist: compact.allowlist },
        cachedUntilMs: now + this.opts.ttlMs,
        bumpedAtMs: now,
      };
      if (gen === this.generation) this.positive.set(hash, ok);
      return ok;
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, "key lookup failed (redis unavailable)");
      return INTERNAL;
    } finally {
      this.pending.delete(hash);
    }
  }

  onEvent(event: PlaneEvent): void {
    switch (event.type) {
      case "key.upsert":
      case "key.revoke":
        this.generation++;
        this.positive.delete(event.keyHash);
        this.negative?.delete(event.keyHash);
        break;
      case "workspace.update":
        this.generation++;
        for (const [hash, entry] of this.positive.entries()) {
          if (entry.key.record.workspaceId === event.workspaceId) this.positive.delete(hash);
        }
        break;
      case "resync":
        this.clear();
        break;
      case "networks.update":
        break;
    }
  }

  clear(): void {
    this.generation++;
    this.positive.clear();
    this.negative?.clear();
  }
}

function checkExpiry(entry: VerifiedOk, nowMs: number): VerifyResult {
  const exp = entry.key.record.expiresAtMs;
  if (exp !== null && exp <= nowMs) return UNKNOWN;
  return entry;
}
