import { randomBytes } from "node:crypto";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import type { Clock } from "../ratelimit/clock";

/** What a filter reports on each poll. */
export const FilterKind = { Logs: "logs", Blocks: "blocks", Pending: "pending" } as const;
export type FilterKind = (typeof FilterKind)[keyof typeof FilterKind];

/** One filter as kept in Redis (a hash under RedisNames.filter). */
export interface FilterRecord {
  readonly kind: FilterKind;
  /** Logs and blocks: the last block the filter has reported on (polls cover last+1 .. head). */
  readonly last: number;
  /** Logs: the filter object as checked (address, topics, fromBlock, toBlock), JSON. */
  readonly criteria?: string;
  /** Pending: the upstream that holds the node-side filter, and that filter's id there. */
  readonly upstreamId?: string;
  readonly remoteId?: string;
}

/** Result of claiming a poll's block range (FilterStore.advance). */
export const Advance = { Claimed: 1, Lost: 0, Gone: -1 } as const;
export type Advance = (typeof Advance)[keyof typeof Advance];

/**
 * Installs a filter unless the tenant has `cap` live ones. KEYS: tenant's set, filter hash. ARGV: now (ms),
 * ttl (ms), cap, id, then the hash's field/value pairs. Expired ids (score = expiry <= now) leave the set
 * first, so they do not count. Returns 1 installed, 0 over the cap.
 */
const INSTALL = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
local exp = tonumber(ARGV[1]) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], exp, ARGV[4])
redis.call('HSET', KEYS[2], 'exp', exp, unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) * 2)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1
`;

/**
 * A poll: moves the filter's `last` from ARGV[3] to ARGV[4] (a compare-and-set: of two polls racing for
 * the same range, one gets it, the other reports nothing, so no block or log is reported twice) and
 * pushes its expiry to now + ttl. KEYS: tenant's set, filter hash. ARGV: now, ttl, from, to, id.
 * Returns 1 claimed, 0 lost to another poll, -1 no such (live) filter.
 */
const ADVANCE = `
local exp = redis.call('HGET', KEYS[2], 'exp')
if not exp or tonumber(exp) <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], ARGV[5])
  return -1
end
if redis.call('HGET', KEYS[2], 'last') ~= ARGV[3] then return 0 end
local nexp = tonumber(ARGV[1]) + tonumber(ARGV[2])
redis.call('HSET', KEYS[2], 'last', ARGV[4], 'exp', nexp)
redis.call('ZADD', KEYS[1], nexp, ARGV[5])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) * 2)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1
`;

/** Removes a filter. KEYS: tenant's set, filter hash. ARGV: now, id. Returns 1 when a live one was removed. */
const UNINSTALL = `
local exp = redis.call('HGET', KEYS[2], 'exp')
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[2])
if exp and tonumber(exp) > tonumber(ARGV[1]) then return 1 end
return 0
`;

/** Filter ids: 16 random bytes as 0x-hex (geth's id shape), unguessable; only this shape is ever looked up. */
const FILTER_ID = /^0x[0-9a-f]{32}$/;

export function newFilterId(): string {
  return `0x${randomBytes(16).toString("hex")}`;
}

type Script = (k1: string, k2: string, ...argv: (string | number)[]) => Promise<number>;

/**
 * The filters the gateway keeps, in Redis, so that any data-plane instance and any of its threads
 * answers a poll of any filter. Each filter is a hash under the tenant's hash tag (RedisNames.filter) with
 * its expiry in our clock's epoch ms (`exp`, checked on every read, so tests step a fake clock instead of
 * waiting); Redis's own key expiry (twice the TTL) only collects what nobody polls or uninstalls. The
 * tenant's sorted set of ids by expiry is what the per-app cap counts.
 *
 * Every method may throw when Redis fails; the caller answers filter_store_unavailable.
 */
export class FilterStore {
  private readonly install: Script;
  private readonly advanceScript: Script;
  private readonly uninstallScript: Script;

  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly clock: Clock,
    readonly ttlMs: number,
    readonly maxPerTenant: number,
  ) {
    const r = redis as unknown as Record<string, Script | undefined>;
    if (typeof r.rgFilterInstall !== "function") {
      redis.defineCommand("rgFilterInstall", { numberOfKeys: 2, lua: INSTALL });
      redis.defineCommand("rgFilterAdvance", { numberOfKeys: 2, lua: ADVANCE });
      redis.defineCommand("rgFilterUninstall", { numberOfKeys: 2, lua: UNINSTALL });
    }
    this.install = (r.rgFilterInstall as Script).bind(redis);
    this.advanceScript = (r.rgFilterAdvance as Script).bind(redis);
    this.uninstallScript = (r.rgFilterUninstall as Script).bind(redis);
  }

  /** Stores a new filter for `tenant`; its id, or undefined when the tenant is at its cap. */
  async add(tenant: string, f: FilterRecord): Promise<string | undefined> {
    const id = newFilterId();
    const fields: (string | number)[] = ["kind", f.kind, "last", f.last];
    if (f.criteria !== undefined) fields.push("criteria", f.criteria);
    if (f.upstreamId !== undefined) fields.push("up", f.upstreamId);
    if (f.remoteId !== undefined) fields.push("rid", f.remoteId);
    const ok = await this.install(
      this.names.filterSet(tenant),
      this.names.filter(tenant, id),
      this.clock.now(),
      this.ttlMs,
      this.maxPerTenant,
      id,
      ...fields,
    );
    return ok === 1 ? id : undefined;
  }

  /** The tenant's live filter `id`, undefined when it has none by that id (unknown, expired, another's). */
  async get(tenant: string, id: string): Promise<FilterRecord | undefined> {
    if (!FILTER_ID.test(id)) return undefined;
    const h = await this.redis.hgetall(this.names.filter(tenant, id));
    const exp = Number(h.exp);
    if (h.kind === undefined || !(exp > this.clock.now())) return undefined;
    const kind = h.kind as FilterKind;
    if (kind !== FilterKind.Logs && kind !== FilterKind.Blocks && kind !== FilterKind.Pending)
      return undefined;
    return { kind, last: Number(h.last), criteria: h.criteria, upstreamId: h.up, remoteId: h.rid };
  }

  /** Claims the range after `from` up to `to` for one poll and keeps the filter alive (see ADVANCE). */
  async advance(tenant: string, id: string, from: number, to: number): Promise<Advance> {
    const r = await this.advanceScript(
      this.names.filterSet(tenant),
      this.names.filter(tenant, id),
      this.clock.now(),
      this.ttlMs,
      String(from),
      String(to),
      id,
    );
    return r as Advance;
  }

  /** Removes the tenant's filter `id`; whether it had a live one. */
  async remove(tenant: string, id: string): Promise<boolean> {
    if (!FILTER_ID.test(id)) return false;
    const r = await this.uninstallScript(
      this.names.filterSet(tenant),
      this.names.filter(tenant, id),
      this.clock.now(),
      id,
    );
    return r === 1;
  }
}
