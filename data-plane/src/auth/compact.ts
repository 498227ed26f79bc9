import {
  type AccessRecord,
  type Allowlist,
  hasAccessRules,
  type KeyRecord,
  type PlanLimits,
} from "../../../shared/src/redis/records";
import { CompiledAccess } from "../access/access-rules";
import { CompiledAllowlist } from "../allowlist/allowlist";

/**
 * Per-key memory of the key cache. A record as parsed from Redis carries its own plan object, allowlist
 * object, arrays and strings, and a compiled allowlist two Sets and two arrays even when the list is
 * empty, which is most apps. Plans, allowlists and workspace ids repeat across keys, so cached records
 * share one immutable copy of each, which cuts the heap per cached key to about a third (figures in
 * docs/benchmarks.md).
 *
 * The intern tables are bounded: past `INTERN_MAX` entries a table is emptied and refilled, which only
 * stops later keys sharing with earlier ones (records already cached keep their references). Shared
 * objects are frozen: nothing on the data plane writes to a key record.
 */
const INTERN_MAX = 10_000;

const EMPTY_LIST: readonly string[] = Object.freeze([]);
const EMPTY_ALLOWLIST: Allowlist = Object.freeze({
  origins: EMPTY_LIST as string[],
  ips: EMPTY_LIST as string[],
});

interface SharedAllowlist {
  readonly list: Allowlist;
  readonly compiled: CompiledAllowlist;
}

const EMPTY_SHARED: SharedAllowlist = {
  list: EMPTY_ALLOWLIST,
  compiled: new CompiledAllowlist(EMPTY_ALLOWLIST),
};

interface SharedAccess {
  readonly record: AccessRecord;
  readonly compiled: CompiledAccess;
}

const plans = new Map<string, PlanLimits>();
const allowlists = new Map<string, SharedAllowlist>();
/**
 * Access rules by content: an app's current key and its predecessor in a grace period (and a record
 * re-published unchanged) share one compiled object, so the JWT cache's verdicts, which are tied to the
 * compiled settings' identity, survive a re-publish that changed nothing.
 */
const accessRules = new Map<string, SharedAccess>();
const workspaceIds = new Map<string, string>();

function bounded<V>(table: Map<string, V>, key: string, value: V): V {
  if (table.size >= INTERN_MAX) table.clear();
  table.set(key, value);
  return value;
}

/**
 * Keyed by the whole plan as parsed (every field of PlanLimitsSchema, in the schema's order), so a field
 * added to plans (the concurrency caps, compute units) is kept, and two plans differing only in it are not
 * shared.
 */
function sharedPlan(p: PlanLimits): PlanLimits {
  const k = JSON.stringify(p);
  return plans.get(k) ?? bounded(plans, k, Object.freeze({ ...p }));
}

function sharedAllowlist(a: Allowlist): SharedAllowlist {
  if (a.origins.length === 0 && a.ips.length === 0) return EMPTY_SHARED;
  const k = JSON.stringify([a.origins, a.ips]);
  const found = allowlists.get(k);
  if (found !== undefined) return found;
  const list: Allowlist = Object.freeze({
    origins: Object.freeze([...a.origins]) as string[],
    ips: Object.freeze([...a.ips]) as string[],
  });
  return bounded(allowlists, k, { list, compiled: new CompiledAllowlist(list) });
}

function sharedAccess(a: AccessRecord | null | undefined): SharedAccess | undefined {
  if (a === null || a === undefined || !hasAccessRules(a)) return undefined;
  const k = JSON.stringify(a);
  const found = accessRules.get(k);
  if (found !== undefined) return found;
  const record = Object.freeze(structuredClone(a));
  return bounded(accessRules, k, { record, compiled: new CompiledAccess(record) });
}

function sharedWorkspaceId(id: string): string {
  return workspaceIds.get(id) ?? bounded(workspaceIds, id, id);
}

/**
 * The record the key cache keeps (plan, allowlist, access rules and workspace id shared), its compiled
 * allowlist and its compiled access rules (undefined: the app has none).
 */
export function compactKeyRecord(r: KeyRecord): {
  record: KeyRecord;
  allowlist: CompiledAllowlist;
  access: CompiledAccess | undefined;
} {
  const a = sharedAllowlist(r.allowlist);
  const rules = sharedAccess(r.access);
  // One object literal with every field, in the schema's order: one hidden class for every cached record.
  const record: KeyRecord = {
    kind: r.kind === "app" ? "app" : "node",
    workspaceId: sharedWorkspaceId(r.workspaceId),
    appId: r.appId,
    nodeId: r.nodeId,
    plan: sharedPlan(r.plan),
    allowlist: a.list,
    expiresAtMs: r.expiresAtMs,
    rpcMethods: r.rpcMethods,
    access: rules?.record ?? null,
  };
  return { record, allowlist: a.compiled, access: rules?.compiled };
}
