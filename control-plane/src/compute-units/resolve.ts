import type { MethodCosts } from "../../../shared/src/redis/records";
import type { MethodCost } from "./method-cost.entity";

/** The method name that stands for every method not listed (the default weight). */
export const DEFAULT_METHOD = "*";
/** The default weight when not even the platform table has `*` (it is seeded and cannot be removed). */
export const FALLBACK_DEFAULT_UNITS = 1;

/** What a network is charged: the platform table overlaid with the network's rows, as published. */
export function resolveMethodCosts(
  platform: readonly MethodCost[],
  network: readonly MethodCost[],
): MethodCosts {
  const methods: Record<string, number> = {};
  let defaultUnits = FALLBACK_DEFAULT_UNITS;
  for (const rows of [platform, network]) {
    for (const r of rows) {
      if (r.method === DEFAULT_METHOD) defaultUnits = r.units;
      else methods[r.method] = r.units;
    }
  }
  return { defaultUnits, methods };
}
