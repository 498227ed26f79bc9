import { DataSource } from "typeorm";
import { AppAccessRules } from "../access/access-rules.entity";
import { AppJwtKey } from "../access/jwt-key.entity";
import { Account } from "../accounts/account.entity";
import { AllowlistEntry } from "../allowlist/allowlist-entry.entity";
import { ApiKey } from "../apps/api-key.entity";
import { App } from "../apps/app.entity";
import { AccessToken } from "../auth/access-token.entity";
import { MethodCost } from "../compute-units/method-cost.entity";
import { Network } from "../networks/network.entity";
import { Upstream } from "../networks/upstream.entity";
import { DedicatedNode } from "../nodes/node.entity";
import { DedicatedNodeEvent } from "../nodes/node-event.entity";
import { Plan } from "../plans/plan.entity";
import { WebhookAttempt } from "../webhooks/webhook-attempt.entity";
import { WebhookDelivery } from "../webhooks/webhook-delivery.entity";
import { WebhookEndpoint } from "../webhooks/webhook-endpoint.entity";
import { Invitation } from "../workspaces/invitation.entity";
import { Membership } from "../workspaces/membership.entity";
import { Workspace } from "../workspaces/workspace.entity";
import { Initial1700000000000 } from "./migrations/1700000000000-initial";
import { Usage1700000001000 } from "./migrations/1700000001000-usage";
import { DedicatedNodes1700000002000 } from "./migrations/1700000002000-dedicated-nodes";
import { PlanSelfService1700000003000 } from "./migrations/1700000003000-plan-self-service";
import { NetworkLogsRange1700000004000 } from "./migrations/1700000004000-network-logs-range";
import { NetworkLogsChunk1700000005400 } from "./migrations/1700000005400-network-logs-chunk";
import { UpstreamCapabilities1700000006000 } from "./migrations/1700000006000-upstream-capabilities";
import { WorkspaceRoles1700000016000 } from "./migrations/1700000016000-workspace-roles";
import { AppAccessRules1700000016100 } from "./migrations/1700000016100-app-access-rules";
import { Webhooks1700000017200 } from "./migrations/1700000017200-webhooks";
import { RequestLog1700000017300 } from "./migrations/1700000017300-request-log";
import { AccountOperator1700000017600 } from "./migrations/1700000017600-account-operator";
import { PlanMaxApps1700000018300 } from "./migrations/1700000018300-plan-max-apps";
import { RequestLogMethodLength1700000024210 } from "./migrations/1700000024210-request-log-method-length";
import { TokenExpiry1700000024400 } from "./migrations/1700000024400-token-expiry";
import { ComputeUnits1700000025100 } from "./migrations/1700000025100-compute-units";
import { UsageComputeUnits1700000025200 } from "./migrations/1700000025200-usage-compute-units";
import { RequestLogComputeUnits1700000025210 } from "./migrations/1700000025210-request-log-compute-units";
import { PlanInFlightCaps1700000025300 } from "./migrations/1700000025300-plan-in-flight-caps";
import { Billing1700000025400 } from "./migrations/1700000025400-billing";
import { SubscriptionEventWeight1700000025500 } from "./migrations/1700000025500-subscription-event-weight";

export const ENTITIES = [
  Account,
  Workspace,
  Membership,
  Invitation,
  AccessToken,
  Plan,
  App,
  ApiKey,
  AllowlistEntry,
  AppAccessRules,
  AppJwtKey,
  Network,
  Upstream,
  MethodCost,
  DedicatedNode,
  DedicatedNodeEvent,
  WebhookEndpoint,
  WebhookDelivery,
  WebhookAttempt,
];

/** Checked-in migrations, oldest first. The schema is never synchronised from the entities. */
export const MIGRATIONS = [
  Initial1700000000000,
  Usage1700000001000,
  DedicatedNodes1700000002000,
  PlanSelfService1700000003000,
  NetworkLogsRange1700000004000,
  NetworkLogsChunk1700000005400,
  UpstreamCapabilities1700000006000,
  WorkspaceRoles1700000016000,
  AppAccessRules1700000016100,
  Webhooks1700000017200,
  RequestLog1700000017300,
  AccountOperator1700000017600,
  PlanMaxApps1700000018300,
  RequestLogMethodLength1700000024210,
  TokenExpiry1700000024400,
  ComputeUnits1700000025100,
  UsageComputeUnits1700000025200,
  RequestLogComputeUnits1700000025210,
  PlanInFlightCaps1700000025300,
  Billing1700000025400,
  SubscriptionEventWeight1700000025500,
];

/** Fixed key of the session-level advisory lock held while migrations run. */
export const MIGRATION_LOCK_KEY = 7_285_310_002;

export function createDataSource(databaseUrl: string, poolSize = 10): DataSource {
  return new DataSource({
    type: "postgres",
    url: databaseUrl,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: "typeorm_migrations",
    synchronize: false,
    migrationsRun: false,
    logging: false,
    // migrate() holds one connection for the advisory lock while TypeORM migrates on another.
    extra: { max: Math.max(2, poolSize) },
  });
}

/**
 * Runs pending migrations while holding `pg_advisory_lock(MIGRATION_LOCK_KEY)`, so two processes
 * starting together apply each migration once: the second waits, then finds nothing to do.
 * Returns the names of the migrations this call applied.
 */
export async function migrate(ds: DataSource): Promise<string[]> {
  const runner = ds.createQueryRunner();
  await runner.connect();
  try {
    await runner.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    try {
      const applied = await ds.runMigrations({ transaction: "each" });
      return applied.map((m) => m.name);
    } finally {
      await runner.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}
