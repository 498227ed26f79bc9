import { z } from "zod";

/**
 * Parses `env` once at process start. On a bad value it throws one error that names every offending
 * variable, e.g. `Invalid configuration: DATA_PLANE_PORT: expected a port number (1-65535), got "x"`.
 */
export function parseEnv<S extends z.ZodObject>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  /** `secrets`: variables whose values are never echoed in the error (tokens, encryption secrets). */
  opts: { secrets?: string[] } = {},
): z.infer<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const name = issue.path.join(".");
    const raw = env[name];
    const shown = opts.secrets?.includes(name) ? "(value hidden)" : JSON.stringify(raw);
    return `${name}: ${issue.message}${raw === undefined ? "" : `, got ${shown}`}`;
  });
  throw new ConfigError(`Invalid configuration: ${lines.join("; ")}`);
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Environment strings to typed values, each with an explicit message for operators. */
export const env = {
  port: (def: number) =>
    z.coerce
      .number({ error: "expected a port number (1-65535)" })
      .int({ error: "expected a port number (1-65535)" })
      .min(0, { error: "expected a port number (1-65535)" })
      .max(65535, { error: "expected a port number (1-65535)" })
      .default(def),
  int: (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
    z.coerce
      .number({ error: `expected an integer ${min}..${max}` })
      .int({ error: `expected an integer ${min}..${max}` })
      .min(min, { error: `expected an integer ${min}..${max}` })
      .max(max, { error: `expected an integer ${min}..${max}` })
      .default(def),
  bool: (def: boolean) =>
    z
      .enum(["true", "false", "1", "0", "yes", "no"], { error: "expected true or false" })
      .default(def ? "true" : "false")
      .transform((v) => v === "true" || v === "1" || v === "yes"),
  url: (def: string, protocols: string[]) =>
    z
      .string()
      .default(def)
      .refine(
        (v) => {
          try {
            return protocols.includes(new URL(v).protocol);
          } catch {
            return false;
          }
        },
        { error: `expected a URL with scheme ${protocols.join(" or ")}` },
      ),
  /** Comma-separated list; empty entries dropped. */
  list: (def = "") =>
    z
      .string()
      .default(def)
      .transform((v) =>
        v
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
      ),
  /**
   * Comma-separated `host:port` list (IPv6 in brackets: `[::1]:7000`); empty entries dropped, empty = [].
   * Parsed to addresses; a malformed entry is named in the error.
   */
  hostPorts: () =>
    z
      .string()
      .default("")
      .transform((v, ctx) => {
        const out: { host: string; port: number }[] = [];
        for (const raw of v.split(",")) {
          const entry = raw.trim();
          if (entry === "") continue;
          const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(entry);
          const port = Number(m?.[3]);
          if (m === null || port < 1 || port > 65535) {
            ctx.addIssue({ code: "custom", message: `expected host:port entries, "${entry}" is not one` });
            return z.NEVER;
          }
          out.push({ host: (m[1] ?? m[2])!, port });
        }
        return out;
      }),
  logLevel: () => z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
};

/** Variables every process reads. */
export const commonEnvShape = {
  DATABASE_URL: env.url("postgres://postgres@127.0.0.1:5432/rpc_gateway", ["postgres:", "postgresql:"]),
  REDIS_URL: env.url("redis://127.0.0.1:6379", ["redis:", "rediss:"]),
  /**
   * Redis Cluster: `host:port` of some of its masters (the rest is discovered); REDIS_URL then gives only
   * the user, password and TLS. Empty: the single Redis at REDIS_URL.
   */
  REDIS_CLUSTER_NODES: env.hostPorts(),
  /** Namespaces every Redis key and channel; lets several deployments or test runs share one Redis. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]{1,64}$/, { error: "expected 1-64 characters of A-Z a-z 0-9 : _ -" })
    .default("rg:"),
  LOG_LEVEL: env.logLevel(),
};
