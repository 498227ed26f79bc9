import { DataSource } from "typeorm";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { type HealthRecord, HealthRecordSchema } from "../../../shared/src/redis/records";
import { Account } from "../accounts/account.entity";
import { isPlatformOperator, RequestContext } from "../auth/context";
import { badInput, forbidden, isUuid, notFound, unauthenticated } from "../common/errors";
import { NIL_UUID } from "../usage/usage.sql";
import { Membership } from "../workspaces/membership.entity";
import { Workspace } from "../workspaces/workspace.entity";
import {
  PlatformUsage,
  PlatformUsageByWorkspace,
  PlatformUsagePoint,
  UpstreamHealthView,
  UpstreamInstanceHealth,
  WorkspaceMemberSummary,
} from "./operator.types";

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Ranges up to this long are summed from usage_hour (hourly series); longer ones from usage_day. */
const MAX_HOURLY_RANGE_MS = 7 * DAY;
const BY_WORKSPACE_MAX = 20;

// biome-ignore lint/suspicious/noExplicitAny: raw pg rows
type Row = Record<string, any>;

/** ADMIN_TOKEN or an operator account; anyone else FORBIDDEN (anonymous UNAUTHENTICATED). */
export function requirePlatformOperator(ctx: RequestContext): void {
  if (!ctx.principal) throw unauthenticated();
  if (!isPlatformOperator(ctx)) throw forbidden("Only a platform operator may do this");
}

/**
 * The operator console's reads and the operator flag. Every method is platform-operator only: tenant
 * isolation rests on `requirePlatformOperator` at the top of each (test/integration/control-plane/operator).
 */
export class OperatorService {
  constructor(
    private readonly ds: DataSource,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly usageMaxRangeDays: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Grants or revokes the operator flag of an account given by id or email. ADMIN_TOKEN only: an operator
   * account manages platform resources, not who else is an operator.
   */
  async setOperator(ctx: RequestContext, account: string, operator: boolean): Promise<Account> {
    if (!ctx.principal) throw unauthenticated();
    if (ctx.principal.kind !== "operator")
      throw forbidden("Only the ADMIN_TOKEN may grant the operator flag");
    const repo = this.ds.getRepository(Account);
    const key = account.trim();
    const row = isUuid(key)
      ? await repo.findOneBy({ id: key })
      : await repo.findOneBy({ email: key.toLowerCase() });
    if (!row) throw notFound("Account");
    row.isOperator = operator;
    await repo.update({ id: row.id }, { isOperator: operator });
    return row;
  }

  /** Every workspace with its plan, oldest first. */
  async workspaces(ctx: RequestContext): Promise<Workspace[]> {
    requirePlatformOperator(ctx);
    return this.ds.getRepository(Workspace).find({ relations: { plan: true }, order: { createdAt: "ASC" } });
  }

  async members(ctx: RequestContext, workspaceId: string): Promise<WorkspaceMemberSummary[]> {
    requirePlatformOperator(ctx);
    const rows = await this.ds.getRepository(Membership).find({
      where: { workspaceId },
      relations: { account: true },
      order: { createdAt: "ASC", id: "ASC" },
    });
    return rows.map((m) => ({ accountId: m.accountId, email: m.account.email, role: m.role }));
  }

  /**
   * The live health records of every data-plane instance (expired ones are dropped from the instances
   * hash as they are found). A record that does not parse is skipped, not fatal.
   */
  async healthRecords(ctx: RequestContext): Promise<HealthRecord[]> {
    requirePlatformOperator(ctx);
    const ids = Object.keys(await this.redis.hgetall(this.names.upstreamHealthInstances()));
    const out: HealthRecord[] = [];
    const gone: string[] = [];
    // One GET per instance (keys are tagged per instance, so no cross-slot MGET on a cluster).
    const values = await Promise.all(ids.map((id) => this.redis.get(this.names.upstreamHealth(id))));
    values.forEach((v, i) => {
      if (v === null) {
        gone.push(ids[i]!);
        return;
      }
      try {
        const r = HealthRecordSchema.safeParse(JSON.parse(v));
        if (r.success) out.push(r.data);
      } catch {
        // A malformed record: leave it to expire.
      }
    });
    if (gone.length > 0) await this.redis.hdel(this.names.upstreamHealthInstances(), ...gone).catch(() => 0);
    return out;
  }

  /** One upstream's health over `records` (see UpstreamHealthView). */
  static aggregate(records: HealthRecord[], networkSlug: string, upstreamId: string): UpstreamHealthView {
    const per: UpstreamInstanceHealth[] = [];
    for (const r of records) {
      const net = r.networks.find((n) => n.slug === networkSlug);
      const u = net?.upstreams.find((x) => x.id === upstreamId);
      if (u) per.push({ instanceId: r.instanceId, at: new Date(r.atMs), ...u });
    }
    per.sort((a, b) => a.instanceId.localeCompare(b.instanceId));
    const n = per.length;
    const heads = per.map((p) => p.head).filter((h) => h >= 0);
    const lags = per.map((p) => p.lagBlocks).filter((l): l is number => l !== null);
    const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);
    const healthyInstances = per.filter((p) => p.healthy).length;
    return {
      instances: n,
      healthyInstances,
      healthy: n > 0 && healthyInstances === n,
      head: heads.length === 0 ? null : Math.max(...heads),
      lagBlocks: lags.length === 0 ? null : Math.max(...lags),
      latencyMs: mean(per.map((p) => p.latencyEwmaMs)),
      errorRate: mean(per.map((p) => p.errorRate)),
      breakerOpen: per.some((p) => p.breakerOpen),
      perInstance: per,
    };
  }

  /** Requests and errors across every workspace over [from, to) (default: the last 24 hours). */
  async platformUsage(ctx: RequestContext, fromIn?: Date | null, toIn?: Date | null): Promise<PlatformUsage> {
    requirePlatformOperator(ctx);
    const now = this.now();
    const to = toIn ? toIn.getTime() : now;
    const from = fromIn ? fromIn.getTime() : Math.floor(now / HOUR) * HOUR - 23 * HOUR;
    if (!Number.isFinite(from) || !Number.isFinite(to)) throw badInput("from", "Invalid range");
    if (from >= to) throw badInput("from", "`from` must be before `to`");
    if (to - from > this.usageMaxRangeDays * DAY)
      throw badInput("from", `The usage range is limited to ${this.usageMaxRangeDays} days`);
    const hourly = to - from <= MAX_HOURLY_RANGE_MS;
    const step = hourly ? HOUR : DAY;
    const start = Math.floor(from / step) * step;
    const table = hourly ? "usage_hour" : "usage_day";
    const col = hourly ? "hour" : "day";
    const range = hourly
      ? { sql: "hour >= $1 AND hour < $2", params: [new Date(start), new Date(to)] }
      : {
          // `to` is exclusive: the last day is the one holding the instant just before it.
          sql: "day >= $1::date AND day <= $2::date",
          params: [new Date(start).toISOString().slice(0, 10), new Date(to - 1).toISOString().slice(0, 10)],
        };
    const series: Row[] = await this.ds.query(
      `SELECT extract(epoch FROM ${col}::timestamp AT TIME ZONE 'UTC')::float8 * 1000 AS at,
              sum(count)::float8 AS requests, sum(compute_units)::float8 AS cu,
              coalesce(sum(count) FILTER (WHERE category <> $3), 0)::float8 AS errors
       FROM ${table} WHERE ${range.sql} GROUP BY 1`,
      [...range.params, ErrorCategory.Success],
    );
    const points = new Map<number, PlatformUsagePoint>();
    for (let t = start; t < to; t += step)
      points.set(t, { at: new Date(t), requests: 0, computeUnits: 0, errors: 0 });
    let requests = 0;
    let computeUnits = 0;
    let errors = 0;
    for (const r of series) {
      const at = Number(r.at);
      const p = points.get(at) ?? { at: new Date(at), requests: 0, computeUnits: 0, errors: 0 };
      p.requests += Number(r.requests);
      p.computeUnits += Number(r.cu);
      computeUnits += Number(r.cu);
      p.errors += Number(r.errors);
      points.set(at, p);
      requests += Number(r.requests);
      errors += Number(r.errors);
    }
    const byWs: Row[] = await this.ds.query(
      `SELECT u.workspace_id AS id, w.name AS name, sum(u.count)::float8 AS requests,
              sum(u.compute_units)::float8 AS cu, coalesce(sum(u.count) FILTER (WHERE u.category <> $3), 0)::float8 AS errors
       FROM ${table} u LEFT JOIN workspaces w ON w.id = u.workspace_id
       WHERE ${range.sql.replaceAll(col, `u.${col}`)}
       GROUP BY 1, 2 ORDER BY 3 DESC, 1 LIMIT ${BY_WORKSPACE_MAX}`,
      [...range.params, ErrorCategory.Success],
    );
    const byWorkspace: PlatformUsageByWorkspace[] = byWs.map((r) => ({
      workspaceId: r.id === NIL_UUID ? null : r.id,
      workspaceName: r.name ?? null,
      requests: Number(r.requests),
      computeUnits: Number(r.cu),
      errors: Number(r.errors),
    }));
    return {
      from: new Date(from),
      to: new Date(to),
      requests,
      computeUnits,
      errors,
      series: [...points.values()].sort((a, b) => a.at.getTime() - b.at.getTime()),
      byWorkspace,
    };
  }
}
