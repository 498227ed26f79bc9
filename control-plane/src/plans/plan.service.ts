import { DataSource } from "typeorm";
import { MAX_APPS_PER_WORKSPACE } from "../apps/app.service";
import { requireAuthenticated } from "../auth/auth.service";
import { isPlatformOperator, RequestContext } from "../auth/context";
import { badInput } from "../common/errors";
import { requireOperator } from "../networks/network.service";
import { PublicationService } from "../publication/publication.service";
import { Plan } from "./plan.entity";

export const PLAN_NAME_RE = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const MAX_LIMIT = 1e15;
/** Largest per-key in-flight cap (the data plane's MAX_IN_FLIGHT_PER_KEY takes at most this too). */
export const MAX_IN_FLIGHT_CAP = 1_000_000;

export interface PlanInputData {
  name: string;
  dailyRequestLimit: number;
  requestsPerSecond: number;
  monthlyRequestLimit?: number | null;
  /** Compute-unit limits; null / omitted = none in that unit (set on every upsert, as maxApps). */
  computeUnitsPerSecond?: number | null;
  dailyComputeUnitLimit?: number | null;
  monthlyComputeUnitLimit?: number | null;
  maxDedicatedNodes?: number | null;
  /** Null / omitted: no plan limit on apps (MAX_APPS_PER_WORKSPACE still applies). */
  maxApps?: number | null;
  /**
   * The per-key concurrency caps: null = the data plane's default (MAX_IN_FLIGHT_PER_KEY /
   * MAX_HEAVY_IN_FLIGHT_PER_KEY); omitted = unchanged (null for a new plan).
   */
  maxInFlightPerKey?: number | null;
  maxHeavyInFlightPerKey?: number | null;
  /** Omitted / null: false for a new plan (private unless said otherwise), unchanged for an existing one. */
  selfService?: boolean | null;
}

export class PlanService {
  constructor(
    private readonly ds: DataSource,
    private readonly publication: PublicationService,
    private readonly planContact: string | null = null,
  ) {}

  /** PLAN_CONTACT, for authenticated callers (the console's Plan page). */
  contact(ctx: RequestContext): string | null {
    requireAuthenticated(ctx);
    return this.planContact;
  }

  /**
   * The operator sees every plan. An account sees the self-service plans plus the plans its own workspaces
   * are on: an operator's private plan (a deal for one customer) is not revealed to other tenants.
   */
  list(ctx: RequestContext): Promise<Plan[]> {
    requireAuthenticated(ctx);
    const q = this.ds
      .getRepository(Plan)
      .createQueryBuilder("p")
      .orderBy("p.daily_request_limit", "ASC")
      .addOrderBy("p.name", "ASC");
    if (ctx.principal?.kind === "account" && !isPlatformOperator(ctx)) {
      q.where(
        `p.self_service OR p.id IN (
          SELECT w.plan_id FROM workspaces w JOIN memberships m ON m.workspace_id = w.id
          WHERE m.account_id = :accountId)`,
        { accountId: ctx.principal.accountId },
      );
    }
    return q.getMany();
  }

  byId(id: string): Promise<Plan> {
    return this.ds.getRepository(Plan).findOneByOrFail({ id });
  }

  /** Operator: creates or edits a plan by name; every workspace on it is re-published. */
  async upsert(ctx: RequestContext, input: PlanInputData): Promise<Plan> {
    requireOperator(ctx);
    if (!PLAN_NAME_RE.test(input.name)) {
      throw badInput(
        "name",
        "Plan name must be 1-32 characters of a-z 0-9 _ -, starting with a letter or digit",
      );
    }
    const positive = (field: string, v: number) => {
      if (!Number.isInteger(v) || v < 1 || v > MAX_LIMIT)
        throw badInput(field, `${field} must be a positive integer`);
    };
    positive("dailyRequestLimit", input.dailyRequestLimit);
    positive("requestsPerSecond", input.requestsPerSecond);
    if (input.requestsPerSecond > 2_000_000_000)
      throw badInput("requestsPerSecond", "requestsPerSecond is too large");
    if (input.monthlyRequestLimit != null) positive("monthlyRequestLimit", input.monthlyRequestLimit);
    if (input.computeUnitsPerSecond != null) {
      positive("computeUnitsPerSecond", input.computeUnitsPerSecond);
      if (input.computeUnitsPerSecond > 2_000_000_000)
        throw badInput("computeUnitsPerSecond", "computeUnitsPerSecond is too large");
    }
    if (input.dailyComputeUnitLimit != null) positive("dailyComputeUnitLimit", input.dailyComputeUnitLimit);
    if (input.monthlyComputeUnitLimit != null)
      positive("monthlyComputeUnitLimit", input.monthlyComputeUnitLimit);
    const maxNodes = input.maxDedicatedNodes ?? 0;
    if (!Number.isInteger(maxNodes) || maxNodes < 0 || maxNodes > 10_000) {
      throw badInput("maxDedicatedNodes", "maxDedicatedNodes must be 0..10000");
    }
    const maxApps = input.maxApps ?? null;
    if (maxApps !== null && (!Number.isInteger(maxApps) || maxApps < 0 || maxApps > MAX_APPS_PER_WORKSPACE)) {
      throw badInput("maxApps", `maxApps must be 0..${MAX_APPS_PER_WORKSPACE} or null`);
    }
    for (const field of ["maxInFlightPerKey", "maxHeavyInFlightPerKey"] as const) {
      const v = input[field];
      if (v != null && (!Number.isInteger(v) || v < 1 || v > MAX_IN_FLIGHT_CAP))
        throw badInput(field, `${field} must be 1..${MAX_IN_FLIGHT_CAP} or null (the data plane's default)`);
    }
    const plan = await this.ds.transaction(async (m) => {
      const repo = m.getRepository(Plan);
      const existing = await repo.findOne({
        where: { name: input.name },
        lock: { mode: "pessimistic_write" },
      });
      const row = existing ?? repo.create({ name: input.name });
      row.dailyRequestLimit = input.dailyRequestLimit;
      row.requestsPerSecond = input.requestsPerSecond;
      row.monthlyRequestLimit = input.monthlyRequestLimit ?? null;
      row.computeUnitsPerSecond = input.computeUnitsPerSecond ?? null;
      row.dailyComputeUnitLimit = input.dailyComputeUnitLimit ?? null;
      row.monthlyComputeUnitLimit = input.monthlyComputeUnitLimit ?? null;
      row.maxDedicatedNodes = maxNodes;
      row.maxApps = maxApps;
      if (input.maxInFlightPerKey !== undefined) row.maxInFlightPerKey = input.maxInFlightPerKey;
      else if (!existing) row.maxInFlightPerKey = null;
      if (input.maxHeavyInFlightPerKey !== undefined)
        row.maxHeavyInFlightPerKey = input.maxHeavyInFlightPerKey;
      else if (!existing) row.maxHeavyInFlightPerKey = null;
      if (input.selfService != null) row.selfService = input.selfService;
      else if (!existing) row.selfService = false;
      return repo.save(row);
    });
    await this.publication.safely("plan", () => this.publication.publishPlan(plan.id));
    return plan;
  }
}
