// GraphQL over plain fetch, same origin as the console (/graphql).

const TOKEN_KEY = "rpc-gateway.token";

export function getToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

export interface GqlErrorItem {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; field?: string; [k: string]: unknown };
}

/** A failed GraphQL call; `fields` maps an input field (extensions.field) to its message. */
export class GqlError extends Error {
  readonly errors: GqlErrorItem[];
  readonly fields: Record<string, string>;
  readonly code?: string;
  readonly status: number;
  constructor(errors: GqlErrorItem[], status: number) {
    super(errors.map((e) => e.message).join("; ") || `HTTP ${status}`);
    this.errors = errors;
    this.status = status;
    this.code = errors[0]?.extensions?.code;
    this.fields = {};
    for (const e of errors) {
      const f = e.extensions?.field;
      if (typeof f === "string" && !(f in this.fields)) this.fields[f] = e.message;
    }
  }
  /** Message of errors not tied to a field (shown at the top of a form). */
  get general(): string | null {
    const rest = this.errors.filter((e) => typeof e.extensions?.field !== "string");
    return rest.length ? rest.map((e) => e.message).join("; ") : null;
  }
}

const listeners = new Set<() => void>();
/** Called when the server says the token is no longer valid. */
export function onUnauthenticated(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export async function gql<T>(query: string, variables?: Record<string, unknown>): Promise<T> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const token = getToken();
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch("/graphql", { method: "POST", headers, body: JSON.stringify({ query, variables }) });
  } catch {
    throw new GqlError([{ message: "Cannot reach the server" }], 0);
  }
  let body: { data?: T; errors?: GqlErrorItem[] };
  try {
    body = await res.json();
  } catch {
    throw new GqlError([{ message: `Unexpected response (HTTP ${res.status})` }], res.status);
  }
  if (body.errors?.length) {
    const err = new GqlError(body.errors, res.status);
    if (err.code === "UNAUTHENTICATED" && token) for (const fn of listeners) fn();
    throw err;
  }
  return body.data as T;
}

export function errorMessage(err: unknown): string {
  if (err instanceof GqlError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

// ---- shapes of what the pages read ----

export type AppEnvironment = "DEVELOPMENT" | "PRODUCTION";
export type AllowlistKind = "ORIGIN" | "IP";

export interface Network {
  id: string;
  slug: string;
  name: string;
  protocol: "EVM" | "SUBSTRATE";
  chainId: number | null;
}

export interface AllowlistEntry {
  id: string;
  kind: AllowlistKind;
  value: string;
  createdAt: string;
}

export interface Endpoint {
  network: Network;
  httpsUrl: string;
  wssUrl: string;
  exampleCommand: string;
}

export interface App {
  id: string;
  name: string;
  environment: AppEnvironment;
  apiKey: string;
  apiKeyCreatedAt: string;
  previousApiKeyExpiresAt: string | null;
  createdAt: string;
  allowlist: AllowlistEntry[];
  endpoints: Endpoint[];
}

export interface Plan {
  id: string;
  name: string;
  dailyRequestLimit: number;
  requestsPerSecond: number;
  monthlyRequestLimit: number | null;
  maxDedicatedNodes: number;
  /** The owner may switch to it in the console; other plans are assigned by the operator. */
  selfService: boolean;
}

export interface Today {
  count: number;
  limit: number;
  resetsAt: string;
}

export const APP_FIELDS = `id name environment apiKey apiKeyCreatedAt previousApiKeyExpiresAt createdAt
  allowlist { id kind value createdAt }
  endpoints { network { id slug name protocol chainId } httpsUrl wssUrl exampleCommand }`;
