import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";

/**
 * Compute units of a group of usage rollup rows (`compute_units`, migration 1700000025200: rows from data
 * planes older than compute units carry their request count, a weight of 1).
 */
const COMPUTE_UNITS_SUM = "sum(compute_units)";
const REFUSED = `category = '${ErrorCategory.TooManyRequests}'`;

/**
 * The select list of a billing sum over usage rollups: `requests`, `cu`, `refused`, `refused_cu` (float8).
 * The statement and the `usage.daily` event both sum with it, so the two always agree.
 */
export const BILLING_SUMS = `sum(count)::float8 AS requests, ${COMPUTE_UNITS_SUM}::float8 AS cu,
  coalesce(sum(count) FILTER (WHERE ${REFUSED}), 0)::float8 AS refused,
  coalesce(${COMPUTE_UNITS_SUM} FILTER (WHERE ${REFUSED}), 0)::float8 AS refused_cu`;

/** The amounts of a billing sum (a statement row, a `usage.daily` total). */
export interface BillingAmounts {
  requests: number;
  computeUnits: number;
  refusedRequests: number;
  refusedComputeUnits: number;
  servedRequests: number;
  servedComputeUnits: number;
}

export function zero(): BillingAmounts {
  return {
    requests: 0,
    computeUnits: 0,
    refusedRequests: 0,
    refusedComputeUnits: 0,
    servedRequests: 0,
    servedComputeUnits: 0,
  };
}

export function add(to: BillingAmounts, r: BillingAmounts): void {
  to.requests += r.requests;
  to.computeUnits += r.computeUnits;
  to.refusedRequests += r.refusedRequests;
  to.refusedComputeUnits += r.refusedComputeUnits;
  to.servedRequests += r.servedRequests;
  to.servedComputeUnits += r.servedComputeUnits;
}

/** The amounts of one row selected with BILLING_SUMS. */
export function amountsOf(r: Record<string, unknown>): BillingAmounts {
  const requests = Number(r.requests);
  const computeUnits = Number(r.cu);
  const refusedRequests = Number(r.refused);
  const refusedComputeUnits = Number(r.refused_cu);
  return {
    requests,
    computeUnits,
    refusedRequests,
    refusedComputeUnits,
    servedRequests: requests - refusedRequests,
    servedComputeUnits: computeUnits - refusedComputeUnits,
  };
}

/** The entry of `key` in `map`, made (and stored) by `make` when there is none. */
export function entry<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let v = map.get(key);
  if (v === undefined) {
    v = make();
    map.set(key, v);
  }
  return v;
}
