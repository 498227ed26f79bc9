import assert from "node:assert/strict";
import {
  globMatch,
  isMethodPattern,
  isUserAgentPattern,
  MethodMatcher,
  UserAgentMatcher,
} from "../../../../shared/src/access/patterns";

describe("shared: access-rule patterns", () => {
  it("method entries are exact names or namespace_* patterns", () => {
    for (const ok of ["eth_call", "eth_signTypedData_v4", "debug_*", "net_version", "web3_*", "rpc_methods"])
      assert.ok(isMethodPattern(ok), ok);
    for (const bad of [
      "",
      "*",
      "eth_*_x",
      "eth*",
      "_eth",
      "eth call",
      "eth_call;",
      "debug_trace*",
      "é_x",
      "1eth",
    ])
      assert.ok(!isMethodPattern(bad), bad);
    assert.ok(!isMethodPattern(`a${"b".repeat(128)}`), "longer than 128");
  });

  it("matches names case-insensitively and trimmed, namespaces by prefix", () => {
    const m = new MethodMatcher(["eth_getBalance", "debug_*"]);
    assert.ok(m.matches("eth_getBalance"));
    assert.ok(m.matches("ETH_GETBALANCE"), "a spelling does not step around a rule");
    assert.ok(m.matches(" eth_getbalance "));
    assert.ok(m.matches("debug_traceTransaction"));
    assert.ok(m.matches("DEBUG_x"));
    assert.ok(!m.matches("eth_getBalances"));
    assert.ok(!m.matches("debugx_y"));
    assert.ok(!m.matches("eth_call"));
    // Memoised answers stay the same.
    assert.ok(m.matches("ETH_GETBALANCE"));
    assert.ok(!m.matches("eth_call"));
  });

  it("User-Agent patterns: printable ASCII, not only wildcards", () => {
    assert.ok(isUserAgentPattern("MyWallet/*"));
    assert.ok(isUserAgentPattern("*Chrome/1*"));
    assert.ok(!isUserAgentPattern("*"));
    assert.ok(!isUserAgentPattern("**"));
    assert.ok(!isUserAgentPattern(""));
    assert.ok(!isUserAgentPattern("tab\there"));
    assert.ok(!isUserAgentPattern("ünï"));
    assert.ok(!isUserAgentPattern("x".repeat(201)));
  });

  it("globs match the whole text, * = any run (including none)", () => {
    assert.ok(globMatch("mywallet/*", "mywallet/1.2.3"));
    assert.ok(globMatch("mywallet/*", "mywallet/"));
    assert.ok(!globMatch("mywallet/*", "xmywallet/1"));
    assert.ok(globMatch("*chrome/*", "mozilla/5.0 (x11) chrome/120.0 safari"));
    assert.ok(globMatch("a*b*c", "abc"));
    assert.ok(globMatch("a*b*c", "aXXbYYbZc"));
    assert.ok(!globMatch("a*b*c", "aXXbYYbZ"));
    assert.ok(globMatch("exact", "exact"));
    assert.ok(!globMatch("exact", "exactly"));
    // No blow-up on a pathological pattern: bounded by text x pattern steps.
    const t0 = performance.now();
    assert.ok(!globMatch(`${"*a".repeat(50)}b`, "a".repeat(4000)));
    assert.ok(performance.now() - t0 < 2000);
  });

  it("User-Agent matcher: case-insensitive, empty list allows all, empty header refused by a list", () => {
    assert.ok(new UserAgentMatcher([]).matches(""));
    const m = new UserAgentMatcher(["MyWallet/*", "curl/*"]);
    assert.ok(m.matches("mywallet/2.0"));
    assert.ok(m.matches("curl/8.5.0"));
    assert.ok(!m.matches("python-requests/2.31"));
    assert.ok(!m.matches(""));
  });
});
