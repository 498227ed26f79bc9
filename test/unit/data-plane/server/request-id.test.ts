import assert from "node:assert/strict";
import {
  isWellFormedRequestId,
  MAX_CLIENT_REQUEST_ID_LENGTH,
  requestIdFor,
} from "../../../../data-plane/src/server/request-id";
import { RequestLogRecordSchema } from "../../../../shared/src/requestlog/contract";

/** The shape of the ids the gateway makes itself (respond.ts nextRequestId). */
const GATEWAY_ID = /^[0-9a-f]{8}-[0-9a-z]+$/;

describe("request ids: a client's X-Request-Id", () => {
  it("is kept when it is 1..100 visible ASCII characters", () => {
    for (const id of [
      "a",
      "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
      "req:42/retry#1",
      "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
      "x".repeat(MAX_CLIENT_REQUEST_ID_LENGTH),
    ]) {
      assert.ok(isWellFormedRequestId(id), id);
      assert.equal(requestIdFor(id), id);
    }
  });

  it("is replaced by a fresh id when absent, too long, or not visible ASCII", () => {
    for (const bad of [
      "",
      "x".repeat(MAX_CLIENT_REQUEST_ID_LENGTH + 1),
      "has space",
      "tab\there",
      "line\r\nx-injected: 1",
      "nul\u0000",
      "del\u007f",
      "café",
      "emoji-\u{1f600}",
    ]) {
      assert.equal(isWellFormedRequestId(bad), false, JSON.stringify(bad));
      const id = requestIdFor(bad);
      assert.match(id, GATEWAY_ID, JSON.stringify(bad));
    }
    assert.notEqual(requestIdFor(""), requestIdFor(""), "fresh ids differ");
  });

  it("the bound fits the request log's request_id (the record contract's maximum)", () => {
    const max = RequestLogRecordSchema.shape.requestId.maxLength;
    assert.equal(max, MAX_CLIENT_REQUEST_ID_LENGTH);
  });
});
