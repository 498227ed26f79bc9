import "reflect-metadata";
import { randomBytes } from "node:crypto";
import { Account } from "../accounts/account.entity";
import { App, AppEnvironment } from "../apps/app.entity";
import { buildEndpoints } from "../apps/endpoints";
import { RequestContext } from "../auth/context";
import { Network, NetworkProtocol } from "../networks/network.entity";
import { Upstream } from "../networks/upstream.entity";
import { createServices, Services } from "../services";
import { runCli } from "./run-cli";

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
  /**
   * The demo account's password: random unless `opts.password` gave one, returned only by the run that
   * created the account (null afterwards: it is stored as a hash, never again in the clear).
   */
  password: string | null;
  /** A fresh session token for the demo account. */
  token: string;
  workspaceId: string;
  appId: string;
  apiKey: string;
  network: string;
  endpoints: { network: string; httpsUrl: string; wssUrl: string; exampleCommand: string }[];
  exampleCommand: string;
  /** The account's operator flag: never set here (only ADMIN_TOKEN's `setOperator` grants it). */
  operator: boolean;
}

const OPERATOR: RequestContext = { principal: { kind: "operator" }, ip: "cli" };

/**
 * Idempotently ensures the demo setup: network `local-evm` (EVM, chain 31337) with the given upstream,
 * a demo account + workspace (free plan) and an app; returns a fresh session token, the key and URLs.
 * The account is an ordinary tenant (never a platform operator: operating the platform takes ADMIN_TOKEN),
 * and its password is random unless given: a fixed one would open every `npm start` reachable by others.
 */
export async function bootstrapDemo(
  services: Services,
  opts: BootstrapDemoOptions,
): Promise<BootstrapDemoResult> {
  const email = (opts.email ?? "demo@example.com").toLowerCase();
  // 18 random bytes: 24 characters of base64url.
  const password = opts.password ?? randomBytes(18).toString("base64url");
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
  let created = false;
  if (!account) {
    const issued = await services.auth.signUp({ email, password, workspaceName: "Demo workspace" });
    account = issued.account;
    token = issued.token;
    created = true;
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
    password: created ? password : null,
    token,
    workspaceId,
    appId: app.id,
    apiKey: view.apiKey,
    network: slug,
    endpoints,
    exampleCommand: mine.exampleCommand,
    operator: (await ds.getRepository(Account).findOneByOrFail({ id: account.id })).isOperator,
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/**
 * `node dist/control-plane/src/cli/bootstrap-demo.js --upstream http://127.0.0.1:8545 [--upstream-ws ws://...]
 *  [--email demo@example.com] [--password PASSWORD]` -> JSON on stdout (the password only when this run
 *  created the account; random unless given).
 */
function main(): void {
  runCli("bootstrap-demo", ({ config, ds, redis, log }) =>
    bootstrapDemo(createServices(config, ds, redis, log), {
      upstreamUrl: arg("upstream") ?? process.env.DEMO_UPSTREAM_URL ?? "http://127.0.0.1:8545",
      upstreamWsUrl: arg("upstream-ws") ?? null,
      email: arg("email"),
      password: arg("password"),
    }),
  );
}

if (require.main === module) main();
