import { DataSource } from "typeorm";
import { deriveEncryptionKey } from "../../shared/src/crypto/api-key";
import { Logger } from "../../shared/src/log/logger";
import type { RedisClient } from "../../shared/src/redis/connect";
import { RedisNames } from "../../shared/src/redis/keys";
import { AccessService } from "./access/access.service";
import { AllowlistService } from "./allowlist/allowlist.service";
import { AppService } from "./apps/app.service";
import { AuthService } from "./auth/auth.service";
import { LoginRateLimiter, type LoginThrottleOptions } from "./auth/login-rate-limit";
import { SignUpRateLimiter } from "./auth/signup-rate-limit";
import { StatementService } from "./billing/statement.service";
import { MethodCostService } from "./compute-units/method-cost.service";
import { ControlPlaneConfig } from "./config";
import { NetworkService } from "./networks/network.service";
import { createNodeProvider, loadNodeConfig } from "./nodes/node.config";
import { NodeService } from "./nodes/node.service";
import { OperatorService } from "./operator/operator.service";
import { PlanService } from "./plans/plan.service";
import { PublicationService } from "./publication/publication.service";
import { RequestLogService } from "./requestlog/requestlog.service";
import { UsageService } from "./usage/usage.service";
import { QueueWebhookEmitter } from "./webhooks/webhook.emitter";
import { WebhookQueue } from "./webhooks/webhook.queue";
import { WebhookService } from "./webhooks/webhook.service";
import { TestSendThrottle } from "./webhooks/webhook-throttles";
import { MemberService } from "./workspaces/member.service";
import { WorkspaceService } from "./workspaces/workspace.service";

export interface Services {
  config: ControlPlaneConfig;
  auth: AuthService;
  workspaces: WorkspaceService;
  members: MemberService;
  apps: AppService;
  allowlist: AllowlistService;
  access: AccessService;
  networks: NetworkService;
  methodCosts: MethodCostService;
  plans: PlanService;
  publication: PublicationService;
  usage: UsageService;
  statements: StatementService;
  requestLog: RequestLogService;
  nodes: NodeService;
  webhooks: WebhookService;
  operator: OperatorService;
}

export function createServices(
  config: ControlPlaneConfig,
  ds: DataSource,
  redis: RedisClient,
  log: Logger,
  /** The port this control plane listens on (known after listen), for the default console URL. */
  boundPort: () => number = () => config.port,
): Services {
  const names = new RedisNames(config.redisKeyPrefix);
  const publication = new PublicationService(ds, redis, names, log, {
    minMs: config.publicationRetryMinMs,
    maxMs: config.publicationRetryMaxMs,
    repairLostMarker: true,
  });
  const workspaces = new WorkspaceService(ds, publication);
  const encryptionKey = deriveEncryptionKey(config.keyEncryptionSecret);
  // Webhook jobs (test sends, events raised by mutations) go out on the command connection.
  const webhookQueue = new WebhookQueue(redis, names, config.webhooks, log);
  const webhookEmitter = new QueueWebhookEmitter(webhookQueue, log);
  const members = new MemberService(
    ds,
    workspaces,
    () => config.publicConsoleUrl ?? `http://127.0.0.1:${boundPort()}/console`,
  );
  const limiter = new LoginRateLimiter(redis, names, loginThrottleOptions(config));
  return {
    config,
    publication,
    workspaces,
    members,
    auth: new AuthService(
      ds,
      limiter,
      publication,
      {
        adminToken: config.adminToken,
        sessionTtlSeconds: config.sessionTtlSeconds,
        accessTokenTtlSeconds: config.accessTokenTtlSeconds,
        accessTokenMaxTtlSeconds: config.accessTokenMaxTtlSeconds,
      },
      new SignUpRateLimiter(redis, names, config.signUpMaxPerIp, config.signUpWindowSeconds),
      members,
    ),
    apps: new AppService(ds, workspaces, publication, encryptionKey, webhookEmitter),
    allowlist: new AllowlistService(ds, workspaces, publication),
    access: new AccessService(ds, workspaces, publication),
    networks: new NetworkService(ds, publication),
    methodCosts: new MethodCostService(ds, publication),
    plans: new PlanService(ds, publication, config.planContact),
    usage: new UsageService(ds, redis, names, workspaces, {
      maxRangeDays: config.usageMaxRangeDays,
      maxSeriesPoints: config.usageMaxSeriesPoints,
    }),
    statements: new StatementService(ds, workspaces),
    requestLog: new RequestLogService(ds, workspaces),
    nodes: new NodeService(
      ds,
      workspaces,
      publication,
      redis,
      names,
      encryptionKey,
      loadNodeConfig(),
      createNodeProvider(loadNodeConfig(), log),
      log,
      webhookEmitter,
    ),
    webhooks: new WebhookService(
      ds,
      workspaces,
      webhookQueue,
      encryptionKey,
      config.webhooks,
      new TestSendThrottle(
        redis,
        names,
        config.webhooks.testMaxPerEndpoint,
        config.webhooks.testWindowSeconds,
      ),
    ),
    operator: new OperatorService(ds, redis, names, config.usageMaxRangeDays),
  };
}

/** The log-in throttle's settings (LOGIN_*). */
export function loginThrottleOptions(config: ControlPlaneConfig): LoginThrottleOptions {
  return {
    maxAttemptsPerAddress: config.loginMaxAttempts,
    windowSeconds: config.loginWindowSeconds,
    freeFailures: config.loginFreeFailures,
    backoffBaseMs: config.loginBackoffBaseMs,
    backoffMaxMs: config.loginBackoffMaxMs,
    maxAttemptsPerEmail: config.loginEmailMaxAttempts,
    emailWindowSeconds: config.loginEmailWindowSeconds,
  };
}
