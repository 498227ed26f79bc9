import "reflect-metadata";
import { Redis } from "ioredis";
import pino from "pino";
import { REDACT_PATHS } from "../../../shared/src/log/logger";
import { Account } from "../accounts/account.entity";
import { App, AppEnvironment } from "../apps/app.entity";
import { buildEndpoints } from "../apps/endpoints";
import { RequestContext } from "../auth/context";
import { loadConfig } from "../config";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";
import { Network, NetworkProtocol } from "../networks/network.entity";
import { Upstream } from "../networks/upstream.entity";
import { createServices, Services } from "../services";

export interface BootstrapDemoOptions {
  upstreamUrl: string;
  upstreamWsUrl?: string | null;
  email?: string;
  password?: string;
  networkSlug?: string;
  appName?: string;
}

export interface BootstrapDemoResult {
  email: string;
  password: string;
  /** A fresh session token for the demo account. */
  token: string;
  workspaceId: string;
  appId: string;
  apiKey: string;
  network: string;
  endpoints: { network: string; httpsUrl: string; wssUrl: string; exampleCommand: string }[];
  exampleCommand: string;
}

const OPERATOR: RequestContext = { principal: { kind: "operator" }, ip: "cli" };

/**
 * Idempotently ensures the demo setup: network `local-evm` (EVM, chain 31337) with the given upstream,
 * a demo account + workspace (free plan) and an app; returns a fresh session token, the key and URLs.
 */
export async function bootstrapDemo(
  services: Services,
  opts: BootstrapDemoOptions,
): Promise<BootstrapDemoResult> {
  const email = (opts.email ?? "demo@example.com").toLowerCase();
  const password = opts.password ?? "demo-password";
  const slug = opts.networkSlug ?? "local-evm";
  const appName = opts.appName ?? "demo";
  const ds = services.publication.dataSource;

  let network = await ds.getRepository(Network).findOneBy({ slug });
  if (!network) {
    network = await services.networks.create(OPERATOR, {
      slug,
      name: "Local EVM (anvil)",
      protocol: NetworkProtocol.EVM,
      chainId: 31337,
    });
  }
  const ups = await ds.getRepository(Upstream).findBy({ networkId: network.id, httpUrl: opts.upstreamUrl });
  if (ups.length === 0) {
    await services.networks.addUpstream(OPERATOR, slug, {
      httpUrl: opts.upstreamUrl,
      wsUrl: opts.upstreamWsUrl ?? null,
    });
  }

  let account = await ds.getRepository(Account).findOneBy({ email });
  let token: string;
  if (!account) {
    const issued = await services.auth.signUp({ email, password, workspaceName: "Demo workspace" });
    account = issued.account;
    token = issued.token;
  } else {
    token = await services.auth.issueSessionToken(account.id);
  }
  const ctx: RequestContext = {
    principal: { kind: "account", accountId: account.id, tokenId: "" },
    ip: "cli",
  };
  const workspaceId = await services.workspaces.callerWorkspaceId(ctx);
  let app = await ds
    .getRepository(App)
    .findOne({ where: { workspaceId, name: appName }, order: { createdAt: "ASC" } });
  if (!app) app = await services.apps.create(ctx, { name: appName, environment: AppEnvironment.DEVELOPMENT });
  const view = await services.apps.keyView(app.id);
  const endpoints = buildEndpoints(
    await services.networks.list(),
    view.apiKey,
    services.config.publicHttpUrl,
    services.config.publicWsUrl,
  ).map((e) => ({
    network: e.network.slug,
    httpsUrl: e.httpsUrl,
    wssUrl: e.wssUrl,
    exampleCommand: e.exampleCommand,
  }));
  const mine = endpoints.find((e) => e.network === slug)!;
  return {
    email,
    password,
    token,
    workspaceId,
    appId: app.id,
    apiKey: view.apiKey,
    network: slug,
    endpoints,
    exampleCommand: mine.exampleCommand,
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/**
 * `node dist/control-plane/src/cli/bootstrap-demo.js --upstream http://127.0.0.1:8545 [--upstream-ws ws://...]
 *  [--email demo@example.com] [--password demo-password]` -> JSON on stdout.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  // Logs go to stderr: stdout carries only the JSON result.
  const log = pino(
    { name: "bootstrap-demo", level: config.logLevel, redact: { paths: REDACT_PATHS, censor: "[redacted]" } },
    pino.destination(2),
  );
  await ensureDatabase(config.databaseUrl);
  const ds = createDataSource(config.databaseUrl, 2);
  await ds.initialize();
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2 });
  try {
    await migrate(ds);
    const services = createServices(config, ds, redis, log);
    const res = await bootstrapDemo(services, {
      upstreamUrl: arg("upstream") ?? process.env.DEMO_UPSTREAM_URL ?? "http://127.0.0.1:8545",
      upstreamWsUrl: arg("upstream-ws") ?? null,
      email: arg("email"),
      password: arg("password"),
    });
    process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
  } finally {
    await redis.quit().catch(() => redis.disconnect());
    await ds.destroy();
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`bootstrap-demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
