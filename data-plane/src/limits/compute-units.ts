import type { MethodCosts } from "../../../shared/src/redis/records";
import { OTHER_METHOD } from "../../../shared/src/usage/contract";
import { type BatchItem, isItemError } from "../rpc/parse";

/**
 * A network's method weights in compute units (docs/compute-units.md), built once when its record loads
 * (NetworkPool.update) from `NetworkRecord.methodCosts`, so that weighing a request object is one Map
 * lookup. A record without `methodCosts` (published before compute units existed, or a dedicated node's
 * pool) weighs every method 1: compute units then equal request objects.
 */
export class MethodWeights {
  private readonly byMethod: Map<string, number>;
  readonly defaultUnits: number;

  constructor(costs: MethodCosts | undefined) {
    this.byMethod = new Map(costs === undefined ? [] : Object.entries(costs.methods));
    this.defaultUnits = costs === undefined ? 1 : costs.defaultUnits;
  }

  /** The weight of one request object of `method` (the default weight for a method not in the table). */
  of(method: string): number {
    const w = this.byMethod.get(method);
    return w === undefined ? this.defaultUnits : w;
  }

  /**
   * The compute units of a message: its single call's method's weight, or the sum of its batch elements'
   * (an invalid element weighs what the usage rows record it under, `other`). The one place a message is
   * weighed: admission charges it, the answer's `X-Compute-Units` reports it. No allocation.
   */
  message(method: string | undefined, items: readonly BatchItem[] | undefined): number {
    if (items === undefined) return this.of(method ?? OTHER_METHOD);
    let units = 0;
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      units += this.of(isItemError(it) ? OTHER_METHOD : it.method);
    }
    return units;
  }
}

/** Every method weighs 1 (no `methodCosts`: records from before compute units, dedicated nodes). */
export const UNIT_WEIGHTS = new MethodWeights(undefined);
