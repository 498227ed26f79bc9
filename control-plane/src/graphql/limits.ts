import type { ApolloServerPlugin } from "@apollo/server";
import { ApolloArmor } from "@escape.tech/graphql-armor";
import {
  type DocumentNode,
  GraphQLError,
  type GraphQLSchema,
  NoSchemaIntrospectionCustomRule,
  parse,
  specifiedRules,
  type ValidationRule,
  validate,
} from "graphql";
import { costError, listCostPlugin, operationCost } from "./cost";

/** Per-operation limits (GRAPHQL_MAX_*); the same for HTTP and graphql-ws. */
export interface GraphqlLimits {
  /** Field nesting depth of one operation (introspection not counted). */
  maxDepth: number;
  /** Aliased fields in one operation (`__typename` not counted). */
  maxAliases: number;
  /** Lexical tokens in one document, counted while parsing, so a huge document is cut off early. */
  maxTokens: number;
  /** GraphQL Armor's cost: objects 2, scalars 1, each level of nesting x1.5. */
  maxCost: number;
  /** Objects one operation may return, lists counted at their size (`operationCost`). */
  maxListCost: number;
  /** Directives in one operation. */
  maxDirectives: number;
}

/**
 * GraphQL Armor for Apollo Server: depth, aliases, cost and directives as validation rules, field
 * suggestions ("Did you mean ...") removed from errors, batching off, no stack traces. A refused operation
 * is a validation error (HTTP 400, GRAPHQL_VALIDATION_FAILED) whose message names the limit, e.g.
 * "Query Cost limit of 5000 exceeded". The token cap is graphql-js's own parser option (`parseOptions`):
 * the same count as Armor's max-tokens, but Armor's Apollo form throws from a plugin hook, which Apollo 5
 * answers with HTTP 500; the parser option gives GRAPHQL_PARSE_FAILED (400) and parses the document once.
 */
export function apolloArmor(limits: GraphqlLimits): {
  plugins: ApolloServerPlugin[];
  validationRules: ValidationRule[];
  parseOptions: { maxTokens: number };
  allowBatchedHttpRequests: false;
  includeStacktraceInErrorResponses: false;
} {
  const armor = new ApolloArmor({
    maxDepth: { n: limits.maxDepth },
    maxAliases: { n: limits.maxAliases },
    maxTokens: { enabled: false },
    costLimit: { maxCost: limits.maxCost },
    maxDirectives: { n: limits.maxDirectives },
  }).protect();
  return {
    ...armor,
    // The list cost needs the variables (`first: $n`), so it runs once the operation is resolved.
    plugins: [...armor.plugins, listCostPlugin(limits.maxListCost)],
    parseOptions: { maxTokens: limits.maxTokens },
  };
}

/**
 * The same limits for graphql-ws, whose `onSubscribe` parses and validates itself: a document over the
 * token limit or failing a rule comes back as errors (sent as an `error` message for that operation id),
 * never as a throw, which graphql-ws would turn into a 4500 close of the whole socket.
 */
export function createWsLimits(limits: GraphqlLimits, introspection: boolean) {
  const rules = [...specifiedRules, ...apolloArmor(limits).validationRules];
  // What Apollo adds with `introspection: false`.
  if (!introspection) rules.push(NoSchemaIntrospectionCustomRule);
  return {
    parse(source: string): DocumentNode | readonly GraphQLError[] {
      try {
        // As over HTTP: graphql-js stops lexing at the token cap.
        return parse(source, { maxTokens: limits.maxTokens });
      } catch (err) {
        const message = err instanceof GraphQLError ? err.message : "Syntax Error";
        return [new GraphQLError(message, { extensions: { code: "GRAPHQL_PARSE_FAILED" } })];
      }
    },
    /**
     * Errors carry GRAPHQL_VALIDATION_FAILED, as Apollo gives them over HTTP (Armor's say BAD_USER_INPUT),
     * and field suggestions are hidden as Armor's Apollo plugin hides them (its plugin doesn't run here).
     */
    validate(
      schema: GraphQLSchema,
      doc: DocumentNode,
      operationName?: string | null,
      variables?: Record<string, unknown> | null,
    ): readonly GraphQLError[] {
      const errors = validate(schema, doc, rules);
      if (errors.length === 0) {
        const cost = operationCost({ schema, document: doc, operationName, variables });
        if (cost > limits.maxListCost) return [costError(cost, limits.maxListCost)];
      }
      return errors.map(
        (e) =>
          new GraphQLError(e.message.replace(/Did you mean ".+"/g, "[Suggestion hidden]"), {
            nodes: e.nodes,
            extensions: { ...e.extensions, code: "GRAPHQL_VALIDATION_FAILED" },
          }),
      );
    },
  };
}
