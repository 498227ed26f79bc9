import type { ApolloServerPlugin } from "@apollo/server";
import { type GraphQLError, Kind, type OperationDefinitionNode } from "graphql";
import { Counter, Histogram, Registry } from "prom-client";

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** `operation` of a request that never got to a valid operation (unparsable, invalid, unknown name). */
const INVALID = "invalid";
/** An error code as the control plane writes them; anything else is counted as OTHER. */
const CODE_RE = /^[A-Z][A-Z0-9_]{0,47}$/;

/**
 * `operation`: the name of the operation's first root field (`apps`, `createApp`, `__schema`). Clients
 * name their operations as they like, so the operation name would let any caller add series; the root
 * field is one of the schema's (validation has passed when this is read), a bounded set.
 */
function rootField(op: OperationDefinitionNode): string {
  const first = op.selectionSet.selections[0];
  return first?.kind === Kind.FIELD ? first.name.value : "other";
}

function errorCode(errors: readonly GraphQLError[]): string {
  const code = errors[0]?.extensions?.code;
  return typeof code === "string" && CODE_RE.test(code) ? code : "OTHER";
}

/**
 * The control plane's GraphQL series over HTTP (`POST /graphql`): requests, requests answered with errors
 * (by the first error's `extensions.code`) and latency, by operation type (query, mutation, subscription,
 * or `unknown` before one was resolved) and root field. Its own registry: `createControlPlane` makes one
 * per instance, and the process entry (main.ts) serves it with the runtime series.
 */
export class GraphqlMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"operation_type" | "operation">;
  private readonly errors: Counter<"operation_type" | "operation" | "code">;
  private readonly duration: Histogram<"operation_type" | "operation">;

  constructor() {
    const registers = [this.registry];
    this.requests = new Counter({
      name: "rpcgw_graphql_requests_total",
      help: "GraphQL requests over HTTP, by operation type and root field",
      labelNames: ["operation_type", "operation"],
      registers,
    });
    this.errors = new Counter({
      name: "rpcgw_graphql_errors_total",
      help: "GraphQL requests answered with errors, by operation type, root field and the first error's code",
      labelNames: ["operation_type", "operation", "code"],
      registers,
    });
    this.duration = new Histogram({
      name: "rpcgw_graphql_request_duration_seconds",
      help: "Time from a GraphQL request received to its response, by operation type and root field",
      labelNames: ["operation_type", "operation"],
      buckets: BUCKETS,
      registers,
    });
  }

  /** The Apollo plugin that records every HTTP request. */
  plugin(): ApolloServerPlugin {
    return {
      requestDidStart: async () => {
        const startedAt = performance.now();
        let type = "unknown";
        let operation = INVALID;
        let code: string | undefined;
        return {
          async didResolveOperation(ctx) {
            if (ctx.operation === undefined) return;
            type = ctx.operation.operation;
            operation = rootField(ctx.operation);
          },
          async didEncounterErrors(ctx) {
            code ??= errorCode(ctx.errors);
          },
          willSendResponse: async () => {
            this.requests.labels(type, operation).inc();
            if (code !== undefined) this.errors.labels(type, operation, code).inc();
            this.duration.labels(type, operation).observe((performance.now() - startedAt) / 1000);
          },
        };
      },
    };
  }
}
