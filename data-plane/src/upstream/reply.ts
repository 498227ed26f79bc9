import { categoryOfNodeError, ErrorCategory, type ErrorRow } from "../../../shared/src/jsonrpc/errors";

export const ReplyKind = { Result: 0, NullResult: 1, Error: 2 } as const;
export type ReplyKind = (typeof ReplyKind)[keyof typeof ReplyKind];

/**
 * A node's answer to one call, kept as JSON text so it can be sent on without re-serialising:
 * `tail` is everything after the id, e.g. `,"result":"0x10"}`; the response to the client is
 * `{"jsonrpc":"2.0","id":` + client id text + tail.
 */
export interface Reply {
  readonly tail: string;
  readonly kind: ReplyKind;
  /** Dashboard category of this answer (Success, or from the node's error code). */
  readonly category: string;
}

export type CallResult = { ok: true; reply: Reply } | { ok: false; error: ErrorRow };

export function replyFromValue(el: Record<string, unknown>): Reply | undefined {
  if ("error" in el && el.error !== null && typeof el.error === "object") {
    const code = (el.error as { code?: unknown }).code;
    return {
      tail: `,"error":${JSON.stringify(el.error)}}`,
      kind: ReplyKind.Error,
      category: typeof code === "number" ? categoryOfNodeError(code) : ErrorCategory.NodeError,
    };
  }
  if ("result" in el) {
    const result = el.result;
    if (result === null || result === undefined) {
      return { tail: ',"result":null}', kind: ReplyKind.NullResult, category: ErrorCategory.Success };
    }
    return {
      tail: `,"result":${JSON.stringify(result)}}`,
      kind: ReplyKind.Result,
      category: ErrorCategory.Success,
    };
  }
  return undefined;
}

const RESULT_MARK = ',"result":';
const ERROR_MARK = ',"error":';

/**
 * Turns a node's response text to a single call with numeric id `gid` into a Reply. Fast path: nodes
 * (geth, anvil, reth, substrate) answer `{"jsonrpc":"2.0","id":<gid>,"result":...}`, so the tail is a
 * slice with no JSON parse of the (possibly large) result. Anything else is parsed and validated.
 * `undefined` when the text is not a JSON-RPC response to that call.
 */
export function parseSingleReply(text: string, gid: number): Reply | undefined {
  const prefix = `{"jsonrpc":"2.0","id":${gid}`;
  if (text.startsWith(prefix)) {
    const tail = text.slice(prefix.length).trimEnd();
    if (tail.endsWith("}")) {
      if (tail.startsWith(RESULT_MARK)) {
        if (tail.length === RESULT_MARK.length + 5 && tail.startsWith("null}", RESULT_MARK.length)) {
          return { tail, kind: ReplyKind.NullResult, category: ErrorCategory.Success };
        }
        return { tail, kind: ReplyKind.Result, category: ErrorCategory.Success };
      }
      if (tail.startsWith(ERROR_MARK)) {
        try {
          const err = JSON.parse(`{${tail.slice(1)}`) as { error?: { code?: unknown } };
          const code = err.error?.code;
          return {
            tail,
            kind: ReplyKind.Error,
            category: typeof code === "number" ? categoryOfNodeError(code) : ErrorCategory.NodeError,
          };
        } catch {
          return undefined;
        }
      }
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const el = value as Record<string, unknown>;
  if (el.id !== gid) return undefined;
  return replyFromValue(el);
}
