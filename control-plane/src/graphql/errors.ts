import { unwrapResolverError } from "@apollo/server/errors";
import { GraphQLFormattedError } from "graphql";
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
