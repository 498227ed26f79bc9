import assert from "node:assert/strict";
import {
  allowHeadersFor,
  GATEWAY_REQUEST_HEADERS,
  MAX_REQUEST_HEADER_NAMES,
  MAX_REQUEST_HEADERS_LENGTH,
  requestedHeaderNames,
} from "../../../../data-plane/src/server/cors";

describe("CORS preflight: Access-Control-Allow-Headers", () => {
  it("without Access-Control-Request-Headers, lists the gateway's own headers", () => {
    assert.equal(allowHeadersFor(""), GATEWAY_REQUEST_HEADERS);
    assert.match(GATEWAY_REQUEST_HEADERS, /\bauthorization\b/);
    assert.match(GATEWAY_REQUEST_HEADERS, /\bx-request-id\b/);
  });

  it("echoes the headers an SDK asks for, lower-cased, once each, after the gateway's own", () => {
    assert.equal(
      allowHeadersFor("Content-Type, X-Client-Version,solana-client ,\tX-CLIENT-version, apikey"),
      `${GATEWAY_REQUEST_HEADERS}, x-client-version, solana-client`,
    );
    assert.equal(allowHeadersFor("x-api-key"), `${GATEWAY_REQUEST_HEADERS}, x-api-key`);
    // Every tchar of RFC 9110 is part of a name.
    assert.equal(allowHeadersFor("a!#$%&'*+-.^_`|~9"), `${GATEWAY_REQUEST_HEADERS}, a!#$%&'*+-.^_\`|~9`);
    // Empty list elements are skipped, as the list syntax allows.
    assert.equal(allowHeadersFor(" , x-a,, "), `${GATEWAY_REQUEST_HEADERS}, x-a`);
  });

  it("falls back to the gateway's own headers for anything that is not a list of header names", () => {
    for (const bad of [
      "x-a, x b", // a space inside a name
      "x-a; x-b",
      'x-"quoted"',
      "x-a\r\nset-cookie: a=1",
      "x-a,(comment)",
      "x-é",
      "x-a:1",
    ]) {
      assert.equal(allowHeadersFor(bad), GATEWAY_REQUEST_HEADERS, JSON.stringify(bad));
      assert.equal(requestedHeaderNames(bad), undefined, JSON.stringify(bad));
    }
  });

  it("is bounded: too long a value or too many names gets the fixed list", () => {
    const many = Array.from({ length: MAX_REQUEST_HEADER_NAMES }, (_, i) => `x-h${i}`);
    assert.equal(requestedHeaderNames(many.join(","))?.length, MAX_REQUEST_HEADER_NAMES);
    assert.equal(requestedHeaderNames([...many, "x-one-more"].join(",")), undefined);
    // Repeats count once.
    assert.equal(requestedHeaderNames([...many, ...many].join(","))?.length, MAX_REQUEST_HEADER_NAMES);
    const long = `x-${"a".repeat(MAX_REQUEST_HEADERS_LENGTH - 2)}`;
    assert.equal(requestedHeaderNames(long)?.length, 1);
    assert.equal(allowHeadersFor(`${long}a`), GATEWAY_REQUEST_HEADERS);
  });
});
