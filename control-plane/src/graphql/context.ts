import { AppKeyView } from "../apps/app.service";
import { RequestContext } from "../auth/context";
import { Services } from "../services";

/** What every resolver receives: the caller plus the services (resolvers stay thin). */
export interface GqlContext extends RequestContext {
  services: Services;
  /** Per-request memo of app key views (apiKey, apiKeyCreatedAt, previousApiKeyExpiresAt, endpoints). */
  keyViews?: Map<string, Promise<AppKeyView>>;
}
