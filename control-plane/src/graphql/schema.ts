import { GraphQLSchema, lexicographicSortSchema, printSchema } from "graphql";
import { buildSchema } from "type-graphql";
import { AccessResolver } from "../access/access.resolver";
import { AllowlistResolver } from "../allowlist/allowlist.resolver";
import { AppResolver } from "../apps/app.resolver";
import { AuthResolver } from "../auth/auth.resolver";
import { StatementResolver } from "../billing/statement.resolver";
import { MethodCostResolver } from "../compute-units/method-cost.resolver";
import { NetworkResolver } from "../networks/network.resolver";
import { NodeResolver } from "../nodes/node.resolver";
import { NodeStatusResolver } from "../nodes/node-status.resolver";
import {
  OperatorResolver,
  OperatorWorkspaceResolver,
  UpstreamHealthResolver,
} from "../operator/operator.resolver";
import { PlanResolver } from "../plans/plan.resolver";
import { RequestLogResolver } from "../requestlog/requestlog.resolver";
import { UsageResolver, WorkspaceUsageResolver } from "../usage/usage.resolver";
import { WebhookDeliveryResolver, WebhookEndpointResolver } from "../webhooks/webhook.resolver";
import { MemberResolver } from "../workspaces/member.resolver";
import { WorkspaceResolver } from "../workspaces/workspace.resolver";

export const RESOLVERS = [
  AuthResolver,
  WorkspaceResolver,
  MemberResolver,
  AppResolver,
  AllowlistResolver,
  AccessResolver,
  NetworkResolver,
  PlanResolver,
  MethodCostResolver,
  UsageResolver,
  RequestLogResolver,
  WorkspaceUsageResolver,
  StatementResolver,
  NodeResolver,
  NodeStatusResolver,
  WebhookEndpointResolver,
  WebhookDeliveryResolver,
  OperatorResolver,
  OperatorWorkspaceResolver,
  UpstreamHealthResolver,
] as const;

let cached: Promise<GraphQLSchema> | undefined;

/** The executable schema (built once per process; type-graphql metadata is global). */
export function buildControlPlaneSchema(): Promise<GraphQLSchema> {
  cached ??= buildSchema({
    resolvers: RESOLVERS,
    validate: { forbidUnknownValues: false },
    // Subscriptions bring their own event source (`subscribe`); type-graphql still requires a pubSub.
    pubSub: {
      publish: () => undefined,
      subscribe: () => {
        throw new Error("topic subscriptions are not used");
      },
    },
  });
  return cached;
}

/** SDL as checked in at the repo root (`schema.graphql`), sorted for stable diffs. */
export async function printControlPlaneSchema(): Promise<string> {
  const schema = await buildControlPlaneSchema();
  return `# Generated from control-plane/src by \`npm run schema\`; do not edit.\n\n${printSchema(lexicographicSortSchema(schema))}\n`;
}
