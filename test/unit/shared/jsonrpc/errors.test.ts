import assert from "node:assert/strict";
import { errorResponse } from "../../../../shared/src/jsonrpc/error-object";
import { categoryOfNodeError, ErrorCategory, GatewayError } from "../../../../shared/src/jsonrpc/errors";

describe("shared/jsonrpc error table", () => {
  it("keeps the contract rows' HTTP status and code", () => {
    assert.equal(GatewayError.ParseError.httpStatus, 400);
    assert.equal(GatewayError.ParseError.code, -32700);
    assert.equal(GatewayError.BodyTooLarge.httpStatus, 413);
    assert.equal(GatewayError.UnknownKey.code, -32016);
    assert.equal(GatewayError.OriginNotAllowed.httpStatus, 403);
    assert.equal(GatewayError.NotFound.code, -32601);
    assert.equal(GatewayError.RateLimited.httpStatus, 429);
    assert.equal(GatewayError.DailyLimit.reason, "daily_limit");
    assert.equal(GatewayError.NoUpstream.category, ErrorCategory.NodeError);
    assert.equal(GatewayError.Internal.category, ErrorCategory.ServiceError);
  });

  it("classifies node errors: -32700 and -32600..-32602 are the client's fault", () => {
    assert.equal(categoryOfNodeError(-32602), ErrorCategory.ClientError);
    assert.equal(categoryOfNodeError(-32700), ErrorCategory.ClientError);
    assert.equal(categoryOfNodeError(-32603), ErrorCategory.NodeError);
    assert.equal(categoryOfNodeError(3), ErrorCategory.NodeError);
  });

  it("builds error objects with category, reason and extras in data", () => {
    const res = errorResponse(GatewayError.RateLimited, "a", { requestId: "r1", retryAfterMs: 250 });
    assert.deepEqual(res, {
      jsonrpc: "2.0",
      id: "a",
      error: {
        code: -32005,
        message: GatewayError.RateLimited.message,
        data: { category: "Too Many Requests", reason: "rate_limit", requestId: "r1", retryAfterMs: 250 },
      },
    });
  });
});
