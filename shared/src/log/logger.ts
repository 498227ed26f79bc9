import pino, { type Logger } from "pino";
import { currentTelemetry } from "../telemetry/telemetry";

/**
 * Every process logs through pino. Secrets never reach the log: API keys, tokens, passwords and auth
 * headers are redacted wherever they appear in a logged object.
 */
export const REDACT_PATHS = [
  "apikey",
  "apiKey",
  "password",
  "token",
  "authorization",
  "*.apikey",
  "*.apiKey",
  "*.password",
  "*.token",
  "*.authorization",
  "headers.authorization",
  "headers.apikey",
  "req.headers.authorization",
  "req.headers.apikey",
];

/**
 * `sync`: each line is written to stdout before the call returns. For worker threads: pino's default
 * stdout stream there is asynchronous and flushed at exit only on the main thread, so a thread's last
 * lines ("data plane stopped") could be lost.
 */
export function createLogger(name: string, level = "info", opts: { sync?: boolean } = {}): Logger {
  // With tracing on, a line written inside a span carries trace_id / span_id (no mixin at all when off).
  const mixin = currentTelemetry()?.logFields;
  const options = { name, level, redact: { paths: REDACT_PATHS, censor: "[redacted]" }, mixin };
  return opts.sync ? pino(options, pino.destination({ dest: 1, sync: true })) : pino(options);
}

export type { Logger };
