import { GraphQLError } from "graphql";

/** Error codes clients can rely on (`extensions.code`). */
export type ErrorCode =
  | "BAD_USER_INPUT"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "TOO_MANY_REQUESTS"
  | "INTERNAL_SERVER_ERROR"
  | "KEY_UNREADABLE";

export const PUBLIC_ERROR_CODES = new Set<string>([
  "BAD_USER_INPUT",
  "UNAUTHENTICATED",
  "FORBIDDEN",
  "NOT_FOUND",
  "TOO_MANY_REQUESTS",
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "BAD_REQUEST",
  "PERSISTED_QUERY_NOT_FOUND",
  "PERSISTED_QUERY_NOT_SUPPORTED",
  "OPERATION_RESOLUTION_FAILURE",
  "KEY_UNREADABLE",
]);

/**
 * Validation failure of one input field; `field` is the input field's name. `reason`: a stable
 * machine-readable cause where clients need one (e.g. INVITATION_EXPIRED).
 */
export function badInput(field: string, message: string, reason?: string): GraphQLError {
  return new GraphQLError(message, {
    extensions: reason ? { code: "BAD_USER_INPUT", field, reason } : { code: "BAD_USER_INPUT", field },
  });
}

export function unauthenticated(message = "Authentication required"): GraphQLError {
  return new GraphQLError(message, { extensions: { code: "UNAUTHENTICATED" } });
}

/** `extra`: machine-readable detail, e.g. `{ role, permission }` when a workspace role is too low. */
export function forbidden(message = "Not allowed", extra: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { ...extra, code: "FORBIDDEN" } });
}

/** Also used for another workspace's ids, so their existence is not revealed. */
export function notFound(what: string): GraphQLError {
  return new GraphQLError(`${what} not found`, { extensions: { code: "NOT_FOUND" } });
}

export function tooManyRequests(message: string, retryAfterSeconds: number): GraphQLError {
  return new GraphQLError(message, { extensions: { code: "TOO_MANY_REQUESTS", retryAfterSeconds } });
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids are UUIDs; anything else can't exist (and must not reach Postgres as a cast error). */
export function isUuid(id: string): boolean {
  return UUID_RE.test(id);
}

/** Postgres unique_violation. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e?.code === "23505" || e?.driverError?.code === "23505";
}

/**
 * A stored key (app or dedicated node) that cannot be shown: its ciphertext does not decrypt with this
 * KEY_ENCRYPTION_SECRET for this row, or decrypts to a key whose hash is not the row's. Never answered
 * with another row's key; regenerating the key replaces it.
 */
export function keyUnreadable(what: string): GraphQLError {
  return new GraphQLError(
    `The stored key of this ${what} cannot be decrypted (KEY_ENCRYPTION_SECRET changed or the row was altered); regenerate the key`,
    { extensions: { code: "KEY_UNREADABLE" } },
  );
}
