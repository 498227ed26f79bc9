import pino, { type Logger } from "pino";

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

export function createLogger(name: string, level = "info"): Logger {
  return pino({ name, level, redact: { paths: REDACT_PATHS, censor: "[redacted]" } });
}

export type { Logger };
