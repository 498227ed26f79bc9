import type { ApolloServerPlugin } from "@apollo/server";
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  isCompositeType,
  isListType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  valueFromASTUntyped,
} from "graphql";
import { MAX_JWT_KEYS_PER_APP } from "../../../shared/src/redis/records";
import { ALLOWLIST_MAX_ENTRIES } from "../allowlist/allowlist.service";
import { MAX_APPS_PER_WORKSPACE } from "../apps/app.service";
import { ACCESS_TOKENS_LIST_MAX } from "../auth/auth.service";
import { MAX_DELIVERIES_PAGE } from "../webhooks/webhook.service";
import { MAX_PENDING_INVITATIONS } from "../workspaces/member.service";

/**
 * How many items a list field may return: `arg` names the argument that sets it (its value, or the
 * argument's default, clamped to `max`); without one (or with a value not known) it counts as `max`.
 * `fromParentArg`: the size is set by the parent field's argument (a connection's `edges`).
 */
interface ListSize {
  max: number;
  arg?: string;
  fromParentArg?: string;
}

/**
 * Lists whose size is known. A list not named here counts DEFAULT_LIST_SIZE items: the operator's lists
 * (networks, plans, upstreams), a workspace's members and nodes, which stay far below it in practice.
 */
const LIST_SIZES: Readonly<Record<string, ListSize>> = {
  "Query.apps": { arg: "first", max: MAX_APPS_PER_WORKSPACE },
  "Workspace.apps": { arg: "first", max: MAX_APPS_PER_WORKSPACE },
  "App.allowlist": { max: ALLOWLIST_MAX_ENTRIES },
  "App.jwtKeys": { max: MAX_JWT_KEYS_PER_APP },
  "Query.accessTokens": { max: ACCESS_TOKENS_LIST_MAX },
  "Query.invitations": { max: MAX_PENDING_INVITATIONS },
  "Query.webhookDeliveries": { arg: "first", max: MAX_DELIVERIES_PAGE },
  "WebhookDelivery.attempts": { max: 20 },
  "DedicatedNode.events": { arg: "limit", max: 1000 },
  "RequestLogConnection.edges": { fromParentArg: "first", max: 500 },
};

/**
 * Rows of a report that one query computes whole (usage history and series, method tables, platform
 * usage): they cost nothing per item here, since no resolver runs per row; the reports' own caps bound
 * them (USAGE_MAX_RANGE_DAYS, USAGE_MAX_SERIES_POINTS, at most 20 workspaces).
 */
const REPORT_ROW_TYPES: ReadonlySet<string> = new Set([
  "UsageDay",
  "AppUsage",
  "UsageApp",
  "UsageSeriesPoint",
  "MethodUsage",
  "PlatformUsagePoint",
  "PlatformUsageByWorkspace",
  "UsageStatementLine",
  "UsageStatementApp",
  "UsageStatementNetwork",
  "UsageStatementDay",
  "UsageStatementPlan",
]);

/**
 * Lists only the platform operator may read: a tenant is refused (FORBIDDEN) before any per-item work,
 * and the operator is trusted with its own infrastructure, so each counts as one item (a tenant probing
 * them gets FORBIDDEN, not a cost refusal).
 */
const OPERATOR_LISTS: ReadonlySet<string> = new Set([
  "Query.operatorWorkspaces",
  "Workspace.operatorMembers",
  "Network.upstreams",
  "UpstreamHealthView.perInstance",
  "UsageStatementPage.statements",
]);

/** Items a list not in LIST_SIZES counts. */
export const DEFAULT_LIST_SIZE = 100;

/**
 * Leaf fields whose value costs real work per parent, counted like an object: a key decrypted
 * (AES-GCM), a node program's log read.
 */
const LEAF_COSTS: Readonly<Record<string, number>> = {
  "App.apiKey": 1,
  "DedicatedNode.apiKey": 1,
  "DedicatedNode.logs": 10,
};

export interface CostInput {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName?: string | null;
  variables?: Record<string, unknown> | null;
}

/**
 * The cost of an operation: every object it may return counts 1 (LEAF_COSTS' fields their cost, report
 * rows nothing),
 * each list multiplied by its size: the value of its size argument (`first`, `limit`, `days`; a
 * variable's value is used, so the number is the one the query will run with), else its known maximum
 * (LIST_SIZES, DEFAULT_LIST_SIZE). A query over 1,000 apps with their keys, endpoints and rules is
 * counted as what it is. Fragments count at every spread; a spread that recurses (invalid anyway) counts
 * once.
 */
export function operationCost(input: CostInput): number {
  const { schema, document } = input;
  const fragments = new Map<string, FragmentDefinitionNode>();
  let operation: OperationDefinitionNode | undefined;
  for (const def of document.definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    else if (def.kind === Kind.OPERATION_DEFINITION) {
      if (!input.operationName || def.name?.value === input.operationName) operation ??= def;
    }
  }
  if (!operation) return 0;
  const root =
    operation.operation === "query"
      ? schema.getQueryType()
      : operation.operation === "mutation"
        ? schema.getMutationType()
        : schema.getSubscriptionType();
  if (!root) return 0;
  const variables = input.variables ?? {};
  const defaults = new Map<string, unknown>();
  for (const v of operation.variableDefinitions ?? []) {
    if (v.defaultValue) defaults.set(v.variable.name.value, valueFromASTUntyped(v.defaultValue));
  }

  /** The integer an argument of `node` holds, or undefined when it is not known. */
  const argValue = (
    node: FieldNode,
    field: GraphQLField<unknown, unknown>,
    name: string,
  ): number | undefined => {
    const ast = node.arguments?.find((a) => a.name.value === name);
    let v: unknown;
    if (!ast) v = field.args.find((a) => a.name === name)?.defaultValue;
    else if (ast.value.kind === Kind.INT) v = Number(ast.value.value);
    else if (ast.value.kind === Kind.VARIABLE) {
      const n = ast.value.name.value;
      v = n in variables ? variables[n] : defaults.get(n);
    }
    return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
  };

  const selectionCost = (
    set: SelectionSetNode,
    type: GraphQLNamedType,
    parent: { node: FieldNode; field: GraphQLField<unknown, unknown> } | null,
    spreads: Set<string>,
  ): number => {
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        if (!isObjectType(type) && !("getFields" in type)) continue;
        const fields = (type as { getFields(): Record<string, GraphQLField<unknown, unknown>> }).getFields();
        const field = fields[sel.name.value];
        if (!field) continue; // __typename and friends; unknown fields fail validation anyway
        const key = `${type.name}.${field.name}`;
        const named = getNamedType(field.type);
        const each = isCompositeType(named)
          ? (REPORT_ROW_TYPES.has(named.name) ? 0 : 1) +
            (sel.selectionSet ? selectionCost(sel.selectionSet, named, { node: sel, field }, spreads) : 0)
          : (LEAF_COSTS[key] ?? 0);
        if (each === 0) continue;
        let size = 1;
        if (isListType(getNullableType(field.type)) && !OPERATOR_LISTS.has(key)) {
          const spec = LIST_SIZES[key] ?? { max: DEFAULT_LIST_SIZE };
          const asked = spec.arg
            ? argValue(sel, field, spec.arg)
            : spec.fromParentArg && parent
              ? argValue(parent.node, parent.field, spec.fromParentArg)
              : undefined;
          size = asked === undefined ? spec.max : Math.min(asked, spec.max);
        }
        total += each * size;
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const on = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : type;
        if (on) total += selectionCost(sel.selectionSet, on, parent, spreads);
      } else {
        const name = sel.name.value;
        const frag = fragments.get(name);
        if (!frag || spreads.has(name)) continue;
        const on = schema.getType(frag.typeCondition.name.value);
        if (!on) continue;
        spreads.add(name);
        total += selectionCost(frag.selectionSet, on, parent, spreads);
        spreads.delete(name);
      }
    }
    return total;
  };
  return selectionCost(operation.selectionSet, root, null, new Set());
}

/** The refusal of an operation over the budget: HTTP 400, as the other limits. */
export function costError(cost: number, maxCost: number): GraphQLError {
  return new GraphQLError(
    `Query list cost limit of ${maxCost} exceeded: this operation may return about ${cost} objects (each list counts as its \`first\`/\`limit\` argument or its largest size). Ask for fewer nested lists or a smaller \`first\` and page with \`after\`.`,
    { extensions: { code: "GRAPHQL_VALIDATION_FAILED", cost, maxCost, http: { status: 400 } } },
  );
}

/** Apollo plugin: refuses an operation whose `operationCost` is over `maxCost` before it runs. */
export function listCostPlugin(maxCost: number): ApolloServerPlugin {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ schema, document, request }) {
          const cost = operationCost({
            schema,
            document,
            operationName: request.operationName,
            variables: request.variables,
          });
          if (cost > maxCost) throw costError(cost, maxCost);
        },
      };
    },
  };
}
