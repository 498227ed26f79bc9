import { unwrapResolverError } from "@apollo/server/errors";
import {
  type ExecutionResult,
  type FormattedExecutionResult,
  GraphQLError,
  GraphQLFormattedError,
} from "graphql";
import { Logger } from "../../../shared/src/log/logger";
import { PUBLIC_ERROR_CODES } from "../common/errors";

interface ValidationErrorLike {
  property: string;
  constraints?: Record<string, string>;
  children?: ValidationErrorLike[];
}

function firstLeaf(errs: ValidationErrorLike[]): { field: string; message: string } | null {
  for (const e of errs) {
    if (e.constraints && Object.keys(e.constraints).length > 0) {
      return { field: e.property, message: Object.values(e.constraints)[0]! };
    }
    const child = e.children ? firstLeaf(e.children) : null;
    if (child) return child;
  }
  return null;
}

/**
 * Apollo `formatError`: errors with a public code pass through (class-validator failures become
 * BAD_USER_INPUT with `extensions.field`); everything else is logged and masked as
 * "Internal server error" with no SQL, stack or driver detail.
 */
export function createFormatError(log: Logger) {
  return (formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError => {
    const code = formatted.extensions?.code as string | undefined;
    if (code && PUBLIC_ERROR_CODES.has(code)) {
      const ext = { ...formatted.extensions };
      delete ext.stacktrace;
      const validationErrors = ext.validationErrors as ValidationErrorLike[] | undefined;
      if (code === "BAD_USER_INPUT" && validationErrors) {
        delete ext.validationErrors;
        const leaf = firstLeaf(validationErrors);
        if (leaf) {
          ext.field = leaf.field;
          return { message: `Invalid ${leaf.field}: ${leaf.message}`, path: formatted.path, extensions: ext };
        }
      }
      return {
        message: formatted.message,
        locations: formatted.locations,
        path: formatted.path,
        extensions: ext,
      };
    }
    log.error(
      { err: unwrapResolverError(error), path: formatted.path },
      "unexpected error in GraphQL request",
    );
    return {
      message: "Internal server error",
      path: formatted.path,
      extensions: { code: "INTERNAL_SERVER_ERROR" },
    };
  };
}

/**
 * The same masking for graphql-ws (`useServer` options): every error a subscription emits, in a `next`
 * payload (resolver / subscribe errors, NOT_FOUND, UNAUTHENTICATED...) or an `error` message (validation,
 * a throw from the event stream), goes through `createFormatError`, so an internal error never reaches a
 * WebSocket client with its SQL, stack or driver detail. Errors from graphql-js validation carry no code:
 * they get GRAPHQL_VALIDATION_FAILED, as Apollo gives them over HTTP.
 */
export function createWsErrorFormatting(log: Logger) {
  const format = createFormatError(log);
  const one = (e: GraphQLError, validation: boolean): GraphQLFormattedError => {
    // A wrapped error (resolver throw, throw from the event stream) carries its original's extensions:
    // a public code passes, anything else is masked.
    const formatted = e.toJSON();
    if (validation && e.originalError == null && formatted.extensions?.code === undefined) {
      return format(
        { ...formatted, extensions: { ...formatted.extensions, code: "GRAPHQL_VALIDATION_FAILED" } },
        e,
      );
    }
    return format(formatted, e);
  };
  return {
    onNext: (
      _ctx: unknown,
      _id: string,
      _payload: unknown,
      _args: unknown,
      result: ExecutionResult,
    ): FormattedExecutionResult | undefined => {
      if (result.errors === undefined || result.errors.length === 0) return undefined;
      const { errors, ...rest } = result;
      return { ...rest, errors: errors.map((e) => one(e, false)) } as FormattedExecutionResult;
    },
    onError: (
      _ctx: unknown,
      _id: string,
      _payload: unknown,
      errors: readonly GraphQLError[],
    ): GraphQLFormattedError[] => errors.map((e) => one(e, true)),
    /**
     * Wraps a `context` factory: a public GraphQLError (a malformed or revoked token) passes; anything
     * else is logged and replaced, so the socket's close reason never carries internal detail.
     */
    context<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
      return async (...args: A) => {
        try {
          return await fn(...args);
        } catch (err) {
          const code = err instanceof GraphQLError ? (err.extensions?.code as string | undefined) : undefined;
          if (code !== undefined && PUBLIC_ERROR_CODES.has(code)) throw err;
          log.error({ err }, "unexpected error in graphql-ws connection context");
          throw new Error("Internal server error");
        }
      };
    },
  };
}
