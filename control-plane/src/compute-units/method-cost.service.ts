import { DataSource, IsNull } from "typeorm";
import { requireAuthenticated } from "../auth/auth.service";
import { RequestContext } from "../auth/context";
import { badInput, notFound } from "../common/errors";
import { Network } from "../networks/network.entity";
import { requireOperator } from "../networks/network.service";
import { PublicationService } from "../publication/publication.service";
import { MethodCost } from "./method-cost.entity";
import { DEFAULT_METHOD, FALLBACK_DEFAULT_UNITS } from "./resolve";

/** A JSON-RPC method name as the usage rows keep it (at most 128 characters, no spaces or quotes). */
const METHOD_RE = /^[A-Za-z][A-Za-z0-9_.]{0,127}$/;
/** Highest weight of one request object (a bound, so that a typo cannot make one call cost a day's quota). */
export const MAX_METHOD_UNITS = 1_000_000;
/** Weights one scope (the platform table, a network) may list: bounds the network record's size. */
export const MAX_METHOD_COSTS_PER_SCOPE = 2_000;

/** Where a weight comes from. */
export type MethodCostSource = "PLATFORM" | "NETWORK";

export interface MethodCostView {
  method: string;
  units: number;
  source: MethodCostSource;
}

export interface MethodCostsView {
  /** Null: the platform default table. */
  networkSlug: string | null;
  defaultUnits: number;
  defaultSource: MethodCostSource;
  methods: MethodCostView[];
}

/**
 * Method weights in compute units: the platform default table and per-network overrides. Reading is open to
 * every signed-in account (a tenant may see what its calls cost); changes are the operator's, and each one
 * republishes the networks (every network record carries its resolved weights, NetworkRecord.methodCosts).
 */
export class MethodCostService {
  constructor(
    private readonly ds: DataSource,
    private readonly publication: PublicationService,
  ) {}

  async list(ctx: RequestContext, networkSlug: string | null): Promise<MethodCostsView> {
    requireAuthenticated(ctx);
    const networkId = networkSlug === null ? null : (await this.network(networkSlug)).id;
    return this.view(networkSlug, networkId);
  }

  /** Operator: sets a weight in the platform table (`networkSlug` null) or a network's overrides. */
  async set(
    ctx: RequestContext,
    networkSlug: string | null,
    method: string,
    units: number,
  ): Promise<MethodCostsView> {
    requireOperator(ctx);
    checkMethod(method);
    if (!Number.isInteger(units) || units < 0 || units > MAX_METHOD_UNITS) {
      throw badInput("units", `units must be a whole number 0..${MAX_METHOD_UNITS}`);
    }
    const networkId = networkSlug === null ? null : (await this.network(networkSlug)).id;
    await this.ds.transaction(async (m) => {
      const repo = m.getRepository(MethodCost);
      const scope = networkId === null ? IsNull() : networkId;
      // Serialises writers of one scope, so the count check below holds.
      await m.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`method_costs:${networkId ?? ""}`]);
      const existing = await repo.findOneBy({ networkId: scope, method });
      if (existing !== null) {
        existing.units = units;
        await repo.save(existing);
        return;
      }
      if ((await repo.countBy({ networkId: scope })) >= MAX_METHOD_COSTS_PER_SCOPE) {
        throw badInput("method", `At most ${MAX_METHOD_COSTS_PER_SCOPE} method weights per table`);
      }
      await repo.insert({ networkId, method, units });
    });
    await this.republish();
    return this.view(networkSlug, networkId);
  }

  /**
   * Operator: removes a weight: a network's override (the platform weight applies again) or a platform
   * entry (the default weight applies). The platform default `*` cannot be removed, only set.
   */
  async remove(ctx: RequestContext, networkSlug: string | null, method: string): Promise<MethodCostsView> {
    requireOperator(ctx);
    checkMethod(method);
    if (networkSlug === null && method === DEFAULT_METHOD) {
      throw badInput("method", "The platform default weight (*) can be changed, not removed");
    }
    const networkId = networkSlug === null ? null : (await this.network(networkSlug)).id;
    const res = await this.ds
      .getRepository(MethodCost)
      .delete({ networkId: networkId === null ? IsNull() : networkId, method });
    if (!res.affected) throw notFound("Method weight");
    await this.republish();
    return this.view(networkSlug, networkId);
  }

  private async republish(): Promise<void> {
    await this.publication.safely("networks", () => this.publication.publishNetworks());
  }

  private async network(slug: string): Promise<Network> {
    const net = await this.ds.getRepository(Network).findOneBy({ slug });
    if (net === null) throw notFound("Network");
    return net;
  }

  private async view(networkSlug: string | null, networkId: string | null): Promise<MethodCostsView> {
    const repo = this.ds.getRepository(MethodCost);
    const platform = await repo.find({ where: { networkId: IsNull() }, order: { method: "ASC" } });
    const own = networkId === null ? [] : await repo.find({ where: { networkId }, order: { method: "ASC" } });
    const byMethod = new Map<string, MethodCostView>();
    for (const r of platform)
      byMethod.set(r.method, { method: r.method, units: r.units, source: "PLATFORM" });
    for (const r of own) byMethod.set(r.method, { method: r.method, units: r.units, source: "NETWORK" });
    const def = byMethod.get(DEFAULT_METHOD);
    byMethod.delete(DEFAULT_METHOD);
    return {
      networkSlug,
      defaultUnits: def?.units ?? FALLBACK_DEFAULT_UNITS,
      defaultSource: def?.source ?? "PLATFORM",
      methods: [...byMethod.values()].sort((a, b) =>
        a.method < b.method ? -1 : a.method > b.method ? 1 : 0,
      ),
    };
  }
}

function checkMethod(method: string): void {
  if (method !== DEFAULT_METHOD && !METHOD_RE.test(method)) {
    throw badInput(
      "method",
      'method must be a JSON-RPC method name (a letter, then up to 127 letters, digits, "_" or "."), or * for the default weight',
    );
  }
}
