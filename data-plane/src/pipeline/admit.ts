import { keyIdentifier, nodeIdentifier, type Refused } from "../limits/admission";
import type { BatchItem } from "../rpc/parse";
import type { PipelineRequest } from "./request";

/** The metrics label of a limits refusal: which kind of endpoint refused. */
export type LimitsEndpoint = "app" | "public" | "node";

/** A whole-request refusal by the limits (429 + `Retry-After`, `data.retryAfterMs`, `data.limit`). */
export type AdmissionRefusal = Pick<
  Refused,
  "row" | "retryAfterMs" | "retryAfterSeconds" | "limit" | "message"
>;

/**
 * Admission, the one place every transport's request goes through before anything is forwarded: the
 * per-second limit (per workspace, an app's own cap, per client address on the public endpoint, per node
 * for a node key), then the workspace's daily / monthly quota and an app's daily cap (limits/admission.ts
 * LimitsGate, whose windows are shared by the process's threads). `cost` is the request objects of the
 * message (a batch of 30 costs 30, notifications and invalid elements included); a refusal answers the
 * whole message and consumes nothing. Sets the request's rate decision (X-RateLimit-*) and, once admitted,
 * its concurrency-cap tenant (a key's: the caps of its plan, memoized on the verified key, so a plan change
 * applies with the re-published record; the public endpoint's: the default caps) and the app's method
 * rules. Synchronous, never throws.
 *
 * The message is weighed here, once, in compute units (limits/compute-units.ts: the network's method weights,
 * `req.weights`): the compute-unit windows and quotas of the plan and the app take that weight, and the
 * answer reports it (`X-Compute-Units`, `req.computeUnits`: the weight once admitted, 0 when refused).
 *
 * `method`: the single call's method (undefined for a batch); `items`: a batch's elements.
 */
export function admit(
  req: PipelineRequest,
  cost: number,
  method: string | undefined,
  items?: readonly BatchItem[],
): AdmissionRefusal | undefined {
  const t0 = req.trace === undefined ? 0 : performance.now();
  const key = req.key;
  const units = req.weights.message(method, method === undefined ? items : undefined);
  const a = req.deps.limits.admit(key, key === undefined ? req.ipBucket : undefined, cost, units);
  req.rate = a.rate;
  req.rateUnit = a.unit;
  req.computeUnits = a.ok ? units : 0;
  const trace = req.trace;
  if (trace !== undefined) {
    trace.step("limits.admit", t0, {
      "gateway.limits.admitted": a.ok,
      "gateway.request_objects": cost,
      "gateway.compute_units": units,
    });
    trace.set(method === undefined ? { "gateway.batch.size": cost } : { "rpc.method": method });
  }
  if (!a.ok) return a;
  const flights = req.deps.flights;
  if (key === undefined) req.flight = flights.flight(`ip:${req.ipBucket ?? "unknown"}`);
  else {
    const node = key.record.kind === "node";
    req.flight = key.flight ??= flights.planFlight(
      node ? nodeIdentifier(key) : keyIdentifier(key),
      key.record.plan,
    );
    if (!node) req.rules = key.access?.methods;
  }
  return undefined;
}
