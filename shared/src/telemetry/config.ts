import { z } from "zod";
import { parseEnv } from "../config/env";

/**
 * OpenTelemetry tracing, read from the standard OTEL_* variables once at process start.
 *
 * Off unless asked for: the SDK's own default (OTEL_TRACES_EXPORTER unset = otlp to localhost:4318) would
 * make every process of a deployment without a collector retry exports forever. So tracing starts only
 * when OTEL_TRACES_EXPORTER names an exporter (`otlp`, `console`) or an OTLP endpoint is set
 * (OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, which imply `otlp`), and
 * OTEL_SDK_DISABLED is not true. When off, no SDK module is even loaded.
 *
 * Everything else (endpoint, protocol, headers, batch sizes, resource attributes) is the SDK's own
 * reading of the same variables; only what the gateway decides itself is parsed here: whether, the
 * sampler (the data plane samples before it builds any span object) and the service name.
 */
export interface TelemetryConfig {
  readonly enabled: boolean;
  readonly serviceName: string;
  readonly sampler: SamplerConfig;
}

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG, as the spec names them. */
export interface SamplerConfig {
  /** Decision for a trace that starts here (no sampled parent to follow). */
  readonly root: "always_on" | "always_off" | "traceidratio";
  /** parentbased_*: an incoming traceparent's sampled flag decides. */
  readonly parentBased: boolean;
  /** traceidratio's fraction, 0..1. */
  readonly ratio: number;
}

const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;

/** The OTEL_* variables the gateway reads itself (docs/contracts.md#environment). */
export const TelemetryEnvSchema = z.object({
  OTEL_SDK_DISABLED: z
    .string()
    .default("false")
    .transform((v) => v.trim().toLowerCase() === "true"),
  OTEL_TRACES_EXPORTER: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean),
    )
    .refine((l) => l.every((e) => e === "otlp" || e === "console" || e === "none"), {
      error: "expected otlp, console or none",
    }),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().optional(),
  OTEL_TRACES_SAMPLER: z
    .string()
    .default("parentbased_always_on")
    .transform((v) => v.trim().toLowerCase())
    .pipe(z.enum(SAMPLERS, { error: `expected one of ${SAMPLERS.join(", ")}` })),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: "expected a ratio 0..1" })
    .min(0, { error: "expected a ratio 0..1" })
    .max(1, { error: "expected a ratio 0..1" })
    .default(1),
  OTEL_SERVICE_NAME: z.string().optional(),
});

/** Reads the tracing configuration; `defaultService` names the process when OTEL_SERVICE_NAME is unset. */
export function loadTelemetryConfig(
  defaultService: string,
  env: NodeJS.ProcessEnv = process.env,
): TelemetryConfig {
  const e = parseEnv(TelemetryEnvSchema, env);
  const exporters = e.OTEL_TRACES_EXPORTER;
  const named = exporters.length > 0 && !exporters.includes("none");
  const endpoint = !!e.OTEL_EXPORTER_OTLP_ENDPOINT || !!e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const enabled = !e.OTEL_SDK_DISABLED && (named || (exporters.length === 0 && endpoint));
  const s = e.OTEL_TRACES_SAMPLER;
  const parentBased = s.startsWith("parentbased_");
  const root = (parentBased ? s.slice("parentbased_".length) : s) as SamplerConfig["root"];
  return {
    enabled,
    serviceName: e.OTEL_SERVICE_NAME || defaultService,
    sampler: { root, parentBased, ratio: e.OTEL_TRACES_SAMPLER_ARG },
  };
}
